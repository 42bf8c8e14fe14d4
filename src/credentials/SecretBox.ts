import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto"
import { mkdirSync, readFileSync, writeFileSync } from "node:fs"
import * as Path from "node:path"
import { Effect, Option, Redacted } from "effect"
import { AppConfig } from "../platform/Config.js"
import { CredentialsConfig } from "./Config.js"

/**
 * What stored secrets are sealed with (docs/tools.md): AES-256-GCM under `SECRETS_KEY`, for MCP credentials and
 * webhook signing secrets alike, so one key and one rotation story covers both.
 *
 * Without `SECRETS_KEY`: the embedded platform (no `DATABASE_URL`) makes a random key once and keeps it in
 * `DATA_DIR/secrets.key` (mode 0600), so a one-process install works out of the box; with `DATABASE_URL` several
 * processes must share the key, so there is none (`available` is false) until it is set.
 */

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
    try {
      writeFileSync(file, key.toString("base64"), { mode: 0o600, flag: "wx" })
      return Option.some(key)
    } catch {
      // Another service of this process made it first (`wx`): read theirs.
      return Option.some(Buffer.from(readFileSync(file, "utf8").trim(), "base64"))
    }
  }
})

export class SecretBox extends Effect.Service<SecretBox>()("atrium/credentials/SecretBox", {
  effect: Effect.gen(function*() {
    const key = yield* keyOf

    /** `v1.<iv>.<tag>.<ciphertext>`, base64 each; none without a key. */
    const seal = (secret: Redacted.Redacted<string>): Option.Option<string> =>
      Option.map(key, (aes) => {
        const iv = randomBytes(12)
        const cipher = createCipheriv("aes-256-gcm", aes, iv)
        const body = Buffer.concat([cipher.update(Redacted.value(secret), "utf8"), cipher.final()])
        return ["v1", iv.toString("base64"), cipher.getAuthTag().toString("base64"), body.toString("base64")].join(".")
      })

    /** The secret sealed in `stored`; none without a key or when it was sealed under another one. */
    const open = (stored: string): Option.Option<Redacted.Redacted<string>> => {
      if (Option.isNone(key)) return Option.none()
      try {
        const [version, iv, tag, body] = stored.split(".")
        if (version !== "v1") return Option.none()
        const decipher = createDecipheriv("aes-256-gcm", key.value, Buffer.from(iv!, "base64"))
        decipher.setAuthTag(Buffer.from(tag!, "base64"))
        const secret = Buffer.concat([decipher.update(Buffer.from(body!, "base64")), decipher.final()]).toString("utf8")
        return Option.some(Redacted.make(secret))
      } catch {
        return Option.none()
      }
    }

    return { available: Option.isSome(key), seal, open } as const
  }),
  dependencies: [CredentialsConfig.Default, AppConfig.Default]
}) {}
