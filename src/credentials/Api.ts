import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { PlatformAuthentication } from "../identity/Domain.js"
import { InvalidRequest, NotFound, ServiceUnavailable } from "../platform/Errors.js"
import { ListParams } from "../platform/http/Lists.js"
import { prefixedId } from "../platform/Ids.js"

/** A stored credential's id (`cred_…`). */
export const CredentialId = prefixedId("cred", "CredentialId")
export type CredentialId = typeof CredentialId.Type

const ServerUrl = Schema.String.pipe(
  Schema.filter((url) => {
    if (url.length > 2000) return "must be at most 2000 characters"
    try {
      const parsed = new URL(url)
      return parsed.protocol === "https:" || parsed.protocol === "http:" || "must be an http(s) URL"
    } catch {
      return "must be an http(s) URL"
    }
  })
)

const Token = Schema.Redacted(
  Schema.String.pipe(Schema.filter((t) => (t.length >= 1 && t.length <= 8192 && !/[\r\n]/.test(t)) || "must be 1-8192 characters on one line"))
)

export const CredentialView = Schema.Struct({
  id: CredentialId,
  server_url: Schema.String,
  /** The token's last four characters (12 or more characters), else `****`: enough to tell two apart. */
  hint: Schema.String,
  created_at: Schema.String
})

/**
 * Per-end-user credentials for remote MCP servers (docs/tools.md). They belong to the caller's account and end user
 * (`X-End-User-Id`); the token is never returned.
 */
export class CredentialsApi extends HttpApiGroup.make("credentials")
  .add(
    HttpApiEndpoint.post("create", "/v1/credentials")
      .setPayload(Schema.Struct({ server_url: ServerUrl, token: Token }))
      .addSuccess(CredentialView, { status: 201 })
      .addError(ServiceUnavailable)
      .annotate(
        OpenApi.Description,
        "Store your token for an MCP server (replacing an earlier one for the same server). Experts whose server has " +
          "`auth: per_end_user` send it as a bearer token, to that server only, on your calls only."
      )
  )
  .add(
    HttpApiEndpoint.get("list", "/v1/credentials")
      .setUrlParams(ListParams)
      .addSuccess(Schema.Struct({ data: Schema.Array(CredentialView), has_more: Schema.Boolean }))
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.del("delete", "/v1/credentials/:id")
      .setPath(Schema.Struct({ id: CredentialId.unchecked }))
      .addSuccess(Schema.Struct({ id: CredentialId, deleted: Schema.Literal(true) }))
      .addError(NotFound)
  )
  .middleware(PlatformAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Credentials")
  .annotate(OpenApi.Description, "Secrets an expert's tools use on an end user's behalf (remote MCP servers); never returned after creation.")
{}
