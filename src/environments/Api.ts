import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { PlatformAuthentication } from "../identity/Domain.js"
import { InvalidRequest, NotFound } from "../platform/Errors.js"
import { FileId } from "../files/Domain.js"
import { EnvironmentInUse } from "./Domain.js"
import { EnvironmentId } from "../platform/Ids.js"
import { ListParams } from "../platform/http/Lists.js"

const bounded = (min: number, max: number) =>
  Schema.String.pipe(
    Schema.filter((s) => (s.length >= min && s.length <= max) || (min === 0 ? `must be at most ${max} characters` : `must be ${min}-${max} characters`))
  )

const Name = bounded(1, 100)
const Description = bounded(0, 2000)
const SetupScript = bounded(0, 65_536)

/** Package specifiers as the sandbox's installer takes them (`numpy==1.26`, `requests`): no whitespace. */
const Packages = Schema.Array(
  Schema.String.pipe(Schema.filter((p) => /^\S{1,200}$/.test(p) || "each package must be 1-200 characters without spaces"))
).pipe(Schema.filter((list) => list.length <= 200 || "at most 200 packages"))

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/
const MAX_ENV_VALUE = 32_768

const envEntries = (entries: Record<string, string | null>) => {
  for (const [name, value] of Object.entries(entries)) {
    if (!ENV_NAME.test(name)) {
      return `variable names are letters, digits and _, not starting with a digit, at most 128 (got "${name.slice(0, 40)}")`
    }
    if (value !== null && value.length > MAX_ENV_VALUE) return `the value of ${name} exceeds ${MAX_ENV_VALUE} characters`
  }
  return true
}

const Env = Schema.Record({ key: Schema.String, value: Schema.String }).pipe(Schema.filter(envEntries))
/** A merge patch of `env`: a string sets a variable, `null` removes it, names not mentioned stay as they are. */
const EnvPatch = Schema.Record({ key: Schema.String, value: Schema.NullOr(Schema.String) }).pipe(Schema.filter(envEntries))

const FileIds = Schema.Array(FileId.unchecked.pipe(Schema.filter((id) => (id.length >= 1 && id.length <= 64) || "file ids are 1-64 characters")))
  .pipe(Schema.filter((list) => list.length <= 100 || "at most 100 files"))

/**
 * An environment as returned: `env` values are never returned whole (secrets live there): a value of 12 or more
 * characters shows as `****` and its last four, a shorter one as `****`.
 */
export const EnvironmentView = Schema.Struct({
  id: EnvironmentId,
  name: Schema.String,
  description: Schema.String,
  packages: Schema.Array(Schema.String),
  env: Schema.Record({ key: Schema.String, value: Schema.String }),
  files: Schema.Array(FileId),
  setup_script: Schema.String,
  created_at: Schema.String,
  updated_at: Schema.String
})

const Path = Schema.Struct({ id: EnvironmentId.unchecked })

/** Spec 4.4: reusable sandbox environments. */
export class EnvironmentsApi extends HttpApiGroup.make("environments")
  .add(
    HttpApiEndpoint.post("create", "/v1/environments")
      .setPayload(Schema.Struct({
        name: Name,
        description: Schema.optionalWith(Description, { exact: true }),
        packages: Schema.optionalWith(Packages, { exact: true }),
        env: Schema.optionalWith(Env, { exact: true }),
        files: Schema.optionalWith(FileIds, { exact: true }),
        setup_script: Schema.optionalWith(SetupScript, { exact: true })
      }))
      .addSuccess(EnvironmentView, { status: 201 })
      .annotate(
        OpenApi.Description,
        "Create a sandbox template. `files` are ids of your files (same end user); `env` values are stored and " +
          "given to the sandbox, but only ever shown masked."
      )
  )
  .add(
    HttpApiEndpoint.get("list", "/v1/environments")
      .setUrlParams(ListParams)
      .addSuccess(Schema.Struct({ data: Schema.Array(EnvironmentView), has_more: Schema.Boolean }))
      .addError(NotFound)
  )
  .add(HttpApiEndpoint.get("get", "/v1/environments/:id").setPath(Path).addSuccess(EnvironmentView).addError(NotFound))
  .add(
    HttpApiEndpoint.patch("update", "/v1/environments/:id")
      .setPath(Path)
      .setPayload(Schema.Struct({
        name: Schema.optionalWith(Name, { exact: true }),
        description: Schema.optionalWith(Description, { exact: true }),
        packages: Schema.optionalWith(Packages, { exact: true }),
        env: Schema.optionalWith(EnvPatch, { exact: true }),
        files: Schema.optionalWith(FileIds, { exact: true }),
        setup_script: Schema.optionalWith(SetupScript, { exact: true })
      }))
      .addSuccess(EnvironmentView)
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "Change some fields. `env` is merged: a string sets a variable, null removes it, others are kept."
      )
  )
  .add(
    HttpApiEndpoint.del("delete", "/v1/environments/:id")
      .setPath(Path)
      .addSuccess(Schema.Struct({ id: EnvironmentId, deleted: Schema.Literal(true) }))
      .addError(NotFound)
      .addError(EnvironmentInUse)
      .annotate(OpenApi.Description, "Delete it; 409 environment_in_use while a session uses it.")
  )
  .middleware(PlatformAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Environments")
  .annotate(OpenApi.Description, "Where an expert's code runs: sandbox settings, packages, network rules.")
{}
