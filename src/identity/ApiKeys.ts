import { Effect, Option } from "effect"
import { NotFound } from "../platform/Errors.js"
import { newApiKeyId, randomBase62, type UserId } from "../platform/Ids.js"
import { IdentityRepo } from "./Repo.js"
import { sha256 } from "./Tokens.js"

export const API_KEY_PREFIX = "sk_"

/** `sk_` + 40 base62 characters: about 238 bits, far past guessing, and easy to spot in a leaked log. */
const generate = () => `${API_KEY_PREFIX}${randomBase62(40)}`

/**
 * API keys (spec 4.8, 5.3). The key is shown once, at creation; the database holds its SHA-256 only, so
 * validation is one indexed lookup of the hash and a revoked key fails at once.
 */
export class ApiKeys extends Effect.Service<ApiKeys>()("atrium/identity/ApiKeys", {
  effect: Effect.gen(function*() {
    const repo = yield* IdentityRepo

    const create = Effect.fn("ApiKeys.create")(function*(userId: UserId, name: string) {
      const key = generate()
      const id = newApiKeyId()
      const createdAt = yield* repo.insertApiKey({
        id,
        userId,
        name,
        keyHash: sha256(key),
        prefix: key.slice(0, API_KEY_PREFIX.length + 4),
        last4: key.slice(-4)
      })
      return { id, name, key, createdAt }
    })

    const revoke = Effect.fn("ApiKeys.revoke")(function*(userId: UserId, id: string) {
      const revoked = yield* repo.revokeApiKey(id, userId)
      if (!revoked) return yield* new NotFound({ message: `No API key ${id}.` })
    })

    /** The owner of a live key, or none. */
    const authenticate = Effect.fn("ApiKeys.authenticate")(function*(key: string) {
      if (!key.startsWith(API_KEY_PREFIX) || key.length > 256) return Option.none()
      return yield* repo.useApiKey(sha256(key))
    })

    return { create, list: repo.listApiKeys, revoke, authenticate } as const
  }),
  dependencies: [IdentityRepo.Default]
}) {}
