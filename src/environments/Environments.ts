import { Effect } from "effect"
import { InvalidRequest, NotFound } from "../platform/Errors.js"
import { type EnvironmentConfig, type EnvironmentRow, EnvironmentsRepo, type WriteResult } from "./Repo.js"
import type { FileId } from "../files/Domain.js"
import type { Partition } from "../identity/Partition.js"
import { EnvironmentInUse } from "./Domain.js"
import { EnvironmentId } from "../platform/Ids.js"

/** What `POST` takes; `PATCH` takes any of it, with `env` as a merge patch (a `null` value removes the name). */
export interface EnvironmentInput {
  readonly name?: string | undefined
  readonly description?: string | undefined
  readonly packages?: ReadonlyArray<string> | undefined
  readonly env?: Readonly<Record<string, string | null>> | undefined
  readonly files?: ReadonlyArray<FileId> | undefined
  readonly setup_script?: string | undefined
}

const unique = <A>(items: ReadonlyArray<A>) => [...new Set(items)]

const apply = (base: EnvironmentConfig, input: EnvironmentInput): EnvironmentConfig => {
  let env = base.env
  if (input.env !== undefined) {
    const next: Record<string, string> = { ...base.env }
    for (const [name, value] of Object.entries(input.env)) {
      if (value === null) delete next[name]
      else next[name] = value
    }
    env = next
  }
  return {
    name: input.name ?? base.name,
    description: input.description ?? base.description,
    packages: input.packages === undefined ? base.packages : unique(input.packages),
    env,
    files: input.files === undefined ? base.files : unique(input.files),
    setupScript: input.setup_script ?? base.setupScript
  }
}

const LIST_LIMIT = 500

/** The most variables an environment holds (after a merge patch). */
export const MAX_ENV_VARS = 100

/**
 * Environments (spec 4.4): reusable sandbox templates (packages, variables, files, a setup script) that a session
 * will start from. Like files they belong to one partition (account and end user); anyone else gets 404.
 */
export class Environments extends Effect.Service<Environments>()("atrium/environments/Environments", {
  effect: Effect.gen(function*() {
    const repo = yield* EnvironmentsRepo
    const notFound = (id: EnvironmentId) => new NotFound({ message: `No environment ${id}.` })

    /** The outcome of a write: the row, or why not. */
    const written = <E>(result: WriteResult, missing: () => Effect.Effect<never, E>) =>
      Effect.gen(function*() {
        switch (result._tag) {
          case "Written":
            return result.environment
          case "Missing":
            return yield* missing()
          case "Rejected":
            return yield* new InvalidRequest({ message: result.message })
          case "UnknownFiles":
            return yield* new InvalidRequest({
              message: `Invalid request: files: no file ${result.ids.join(", ")} (upload it with /v1/files first; ` +
                "files of another end user or account cannot be used)."
            })
        }
      })

    /** What a schema cannot see: the size of `env` after a merge patch. */
    const check = (config: EnvironmentConfig): EnvironmentConfig | string =>
      Object.keys(config.env).length > MAX_ENV_VARS
        ? `Invalid request: env: at most ${MAX_ENV_VARS} variables.`
        : config

    const create = Effect.fn("Environments.create")(function*(
      partition: Partition,
      input: EnvironmentInput & { readonly name: string }
    ) {
      const config = check(
        apply({ name: input.name, description: "", packages: [], env: {}, files: [], setupScript: "" }, input)
      )
      if (typeof config === "string") return yield* new InvalidRequest({ message: config })
      const id = EnvironmentId.random()
      return yield* written(yield* repo.insert(id, partition, config), () => Effect.dieMessage("insert found no row"))
    })

    const update = Effect.fn("Environments.update")(function*(partition: Partition, id: EnvironmentId, input: EnvironmentInput) {
      return yield* written(
        yield* repo.update(partition, id, (current) => check(apply(current, input))),
        () => Effect.fail(notFound(id))
      )
    })

    const get = Effect.fn("Environments.get")(function*(partition: Partition, id: EnvironmentId) {
      const found = yield* repo.byId(partition, id)
      if (found._tag === "None") return yield* notFound(id)
      return found.value
    })

    const remove = Effect.fn("Environments.remove")(function*(partition: Partition, id: EnvironmentId) {
      const outcome = yield* repo.remove(partition, id)
      if (outcome._tag === "Missing") return yield* notFound(id)
      if (outcome._tag === "InUse") {
        return yield* new EnvironmentInUse({
          message: `Environment ${id} is used by ${outcome.sessions} session(s): end them before deleting it.`
        })
      }
    })

    /** Newest first; the first `LIST_LIMIT`, and whether there are more. */
    const list = (partition: Partition) =>
      Effect.map(repo.list(partition, LIST_LIMIT + 1), (rows) => ({
        data: rows.slice(0, LIST_LIMIT),
        hasMore: rows.length > LIST_LIMIT
      }))

    return { create, update, get, remove, list } as const
  }),
  dependencies: [EnvironmentsRepo.Default]
}) {}

export type { EnvironmentRow }
