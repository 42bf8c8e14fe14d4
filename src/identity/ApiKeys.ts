import { Clock, Effect, Option } from "effect"
import { NotFound } from "../platform/Errors.js"
import { ApiKeyId, randomBase62, type UserId } from "../platform/Ids.js"
import { BearerCache } from "./BearerCache.js"
import { IdentityRepo } from "./Repo.js"
import { sha256 } from "./Tokens.js"

export const API_KEY_PREFIX = "sk_"

/**
 * How long this process trusts an API key it looked up (issue 45 item 3): a key revoked here is dropped at once; one
 * revoked through another process stops working here within this.
 */
export const API_KEY_CACHE_MS = 2_000

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
      const id = ApiKeyId.random()
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

    /** Live keys looked up lately, by the key: a repeated key is not looked up (nor its `last_used_at` written) again. */
    const live = new BearerCache<{ readonly id: ApiKeyId; readonly userId: UserId; readonly phone: string }>(10_000)
    /** Revocations so far: a lookup that a revocation overtook does not cache what it found. */
    let revocations = 0

    const revoke = Effect.fn("ApiKeys.revoke")(function*(userId: UserId, id: ApiKeyId) {
      revocations += 1
      live.deleteWhere((key) => key.id === id)
      const revoked = yield* repo.revokeApiKey(id, userId)
      // Again after the write: a lookup that read the key before it was revoked may have cached it meanwhile.
      live.deleteWhere((key) => key.id === id)
      if (!revoked) return yield* new NotFound({ message: `No API key ${id}.` })
    })

    /** The owner of a live key, or none. */
    const authenticate = Effect.fn("ApiKeys.authenticate")(function*(key: string) {
      if (!key.startsWith(API_KEY_PREFIX) || key.length > 256) return Option.none()
      const now = yield* Clock.currentTimeMillis
      const known = live.get(key, now)
      if (known !== undefined) return Option.some(known)
      const before = revocations
      const found = yield* repo.useApiKey(sha256(key))
      if (Option.isSome(found) && revocations === before) live.set(key, found.value, now + API_KEY_CACHE_MS)
      return found
    })

    return { create, list: repo.listApiKeys, revoke, authenticate } as const
  }),
  dependencies: [IdentityRepo.Default]
}) {}
