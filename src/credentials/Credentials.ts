import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto"
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import * as Path from "node:path"
import { Effect, Option, Redacted } from "effect"
import { AppConfig } from "../platform/Config.js"
import { NotFound, ServiceUnavailable } from "../platform/Errors.js"
import { randomBase62 } from "../platform/Ids.js"
import { CredentialsConfig } from "./Config.js"
import { CredentialsRepo } from "./Repo.js"

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
  readonly accountId: string
  readonly endUserId: string
}

/** A server's URL as credentials are keyed: no fragment, no trailing slash. */
export const serverKey = (url: string) => {
  const parsed = new URL(url)
  parsed.hash = ""
  return parsed.toString().replace(/\/$/, "")
}

/** The AES key: `SECRETS_KEY`'s SHA-256 when set (any text works, a 32-byte base64 key as well as a passphrase);
 * else, embedded, the key kept in `DATA_DIR/secrets.key` (made once); else none. */
const keyOf = Effect.gen(function*() {
  const config = yield* CredentialsConfig
  if (Option.isSome(config.secretsKey)) {
    return Option.some(createHash("sha256").update(Redacted.value(config.secretsKey.value)).digest())
  }
  const app = yield* AppConfig
  if (Option.isSome(app.databaseUrl)) return Option.none<Buffer>()
  const file = Path.resolve(app.dataDir, "secrets.key")
  try {
    return Option.some(Buffer.from(readFileSync(file, "utf8").trim(), "base64"))
  } catch {
    const key = randomBytes(32)
    mkdirSync(app.dataDir, { recursive: true })
    writeFileSync(file, key.toString("base64"), { mode: 0o600, flag: "wx" })
    return Option.some(key)
  }
})

export class Credentials extends Effect.Service<Credentials>()("atrium/credentials/Credentials", {
  effect: Effect.gen(function*() {
    const repo = yield* CredentialsRepo
    const key = yield* keyOf

    const unavailable = () =>
      new ServiceUnavailable({ message: "Credentials need SECRETS_KEY: set it on every process of this deployment." })

    const encrypt = (aes: Buffer, secret: string) => {
      const iv = randomBytes(12)
      const cipher = createCipheriv("aes-256-gcm", aes, iv)
      const body = Buffer.concat([cipher.update(secret, "utf8"), cipher.final()])
      return ["v1", iv.toString("base64"), cipher.getAuthTag().toString("base64"), body.toString("base64")].join(".")
    }

    const decrypt = (aes: Buffer, stored: string): Option.Option<Redacted.Redacted<string>> => {
      try {
        const [version, iv, tag, body] = stored.split(".")
        if (version !== "v1") return Option.none()
        const decipher = createDecipheriv("aes-256-gcm", aes, Buffer.from(iv!, "base64"))
        decipher.setAuthTag(Buffer.from(tag!, "base64"))
        const secret = Buffer.concat([decipher.update(Buffer.from(body!, "base64")), decipher.final()]).toString("utf8")
        return Option.some(Redacted.make(secret))
      } catch {
        // A credential stored under another key cannot be read: as good as missing (the caller stores it again).
        return Option.none()
      }
    }

    const view = (row: { id: string; serverUrl: string; hint: string; createdAt: Date }) => ({
      id: row.id,
      server_url: row.serverUrl,
      hint: row.hint,
      created_at: row.createdAt.toISOString()
    })

    const create = Effect.fn("Credentials.create")(function*(owner: Owner, serverUrl: string, token: Redacted.Redacted<string>) {
      if (Option.isNone(key)) return yield* unavailable()
      const secret = Redacted.value(token)
      const row = yield* repo.upsert({
        id: `cred_${randomBase62(20)}`,
        ...owner,
        serverUrl: serverKey(serverUrl),
        secret: encrypt(key.value, secret),
        hint: secret.length >= 12 ? `****${secret.slice(-4)}` : "****"
      })
      return view(row)
    })

    const list = Effect.fn("Credentials.list")(function*(owner: Owner) {
      return (yield* repo.list(owner)).map(view)
    })

    const remove = Effect.fn("Credentials.remove")(function*(owner: Owner, id: string) {
      if (!(yield* repo.remove({ ...owner, id }))) return yield* new NotFound({ message: `No credential ${id}.` })
    })

    /** The secret for `owner`'s calls to `serverUrl`, if they stored one (and it can be read). */
    const secretFor = (owner: Owner, serverUrl: string) =>
      Effect.gen(function*() {
        if (Option.isNone(key)) return Option.none<Redacted.Redacted<string>>()
        const row = yield* repo.forServer({ ...owner, serverUrl: serverKey(serverUrl) })
        return Option.flatMap(row, (found) => decrypt(key.value, found.secret))
      }).pipe(Effect.withSpan("Credentials.secretFor"))

    return { create, list, remove, secretFor } as const
  }),
  dependencies: [CredentialsRepo.Default, CredentialsConfig.Default, AppConfig.Default]
}) {}
