import { Effect, Option, Redacted } from "effect"
import { NotFound, ServiceUnavailable } from "../platform/Errors.js"
import type { UserId } from "../platform/Ids.js"
import { CredentialId } from "./Api.js"
import { CredentialsRepo } from "./Repo.js"
import { SecretBox } from "./SecretBox.js"

/**
 * Per-end-user credentials for remote MCP servers (docs/tools.md): a token an end user (or an API caller, per
 * `X-End-User-Id`) gives for one server URL. Stored encrypted (AES-256-GCM under `SECRETS_KEY`), never logged,
 * never returned after creation, and read only by the run engine for that end user's calls to that server.
 *
 * Without `SECRETS_KEY`: the embedded platform (no `DATABASE_URL`) makes a random key once and keeps it in
 * `DATA_DIR/secrets.key` (mode 0600), so a one-process install works out of the box; with `DATABASE_URL` several
 * processes must share the key, so credentials are refused (503) until it is set.
 */

export interface Owner {
  readonly accountId: UserId
  readonly endUserId: string
}

/** A server's URL as credentials are keyed: no fragment, no trailing slash. */
export const serverKey = (url: string) => {
  const parsed = new URL(url)
  parsed.hash = ""
  return parsed.toString().replace(/\/$/, "")
}

export class Credentials extends Effect.Service<Credentials>()("atrium/credentials/Credentials", {
  effect: Effect.gen(function*() {
    const repo = yield* CredentialsRepo
    const box = yield* SecretBox

    const unavailable = () =>
      new ServiceUnavailable({ message: "Credentials need SECRETS_KEY: set it on every process of this deployment." })

    const view = (row: { id: CredentialId; serverUrl: string; hint: string; createdAt: Date }) => ({
      id: row.id,
      server_url: row.serverUrl,
      hint: row.hint,
      created_at: row.createdAt.toISOString()
    })

    const create = Effect.fn("Credentials.create")(function*(owner: Owner, serverUrl: string, token: Redacted.Redacted<string>) {
      const sealed = box.seal(token)
      if (Option.isNone(sealed)) return yield* unavailable()
      const secret = Redacted.value(token)
      const row = yield* repo.upsert({
        id: CredentialId.random(),
        ...owner,
        serverUrl: serverKey(serverUrl),
        secret: sealed.value,
        hint: secret.length >= 12 ? `****${secret.slice(-4)}` : "****"
      })
      return view(row)
    })

    const list = Effect.fn("Credentials.list")(function*(owner: Owner) {
      return (yield* repo.list(owner)).map(view)
    })

    const remove = Effect.fn("Credentials.remove")(function*(owner: Owner, id: CredentialId) {
      if (!(yield* repo.remove({ ...owner, id }))) return yield* new NotFound({ message: `No credential ${id}.` })
    })

    /** The secret for `owner`'s calls to `serverUrl`, if they stored one (and it can be read). */
    const secretFor = (owner: Owner, serverUrl: string) =>
      Effect.gen(function*() {
        if (!box.available) return Option.none<Redacted.Redacted<string>>()
        const row = yield* repo.forServer({ ...owner, serverUrl: serverKey(serverUrl) })
        // A credential stored under another key cannot be read: as good as missing (the caller stores it again).
        return Option.flatMap(row, (found) => box.open(found.secret))
      }).pipe(Effect.withSpan("Credentials.secretFor"))

    return { create, list, remove, secretFor } as const
  }),
  dependencies: [CredentialsRepo.Default, SecretBox.Default]
}) {}
