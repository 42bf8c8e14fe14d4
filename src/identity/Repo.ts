import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Option, Schema } from "effect"
import { ApiKeyId, UserId } from "../platform/Ids.js"

export class User extends Schema.Class<User>("User")({
  id: UserId,
  phone: Schema.String,
  createdAt: Schema.DateFromSelf
}) {}

export class ApiKeyRecord extends Schema.Class<ApiKeyRecord>("ApiKeyRecord")({
  id: ApiKeyId,
  userId: UserId,
  name: Schema.String,
  prefix: Schema.String,
  last4: Schema.String,
  createdAt: Schema.DateFromSelf,
  lastUsedAt: Schema.NullOr(Schema.DateFromSelf)
}) {}

const CurrentToken = Schema.Struct({
  hash: Schema.NullOr(Schema.String),
  iat: Schema.NullOr(Schema.NumberFromString)
})

/** Users, their current login token and their API keys. SQL failures are defects here, at the repository edge. */
export class IdentityRepo extends Effect.Service<IdentityRepo>()("atrium/identity/IdentityRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /** Creates the user on first login; `created` tells a new user from a returning one. */
    const upsertByPhone = SqlSchema.single({
      Request: Schema.Struct({ id: UserId, phone: Schema.String }),
      Result: Schema.Struct({ ...User.fields, created: Schema.Boolean }),
      execute: ({ id, phone }) =>
        sql`
          INSERT INTO users (id, phone) VALUES (${id}, ${phone})
          ON CONFLICT (phone) DO UPDATE SET last_login_at = now()
          RETURNING id, phone, created_at, (xmax = 0) AS created`
    })

    const findUser = SqlSchema.findOne({
      Request: UserId,
      Result: User,
      execute: (id) => sql`SELECT id, phone, created_at FROM users WHERE id = ${id}`
    })

    const currentToken = SqlSchema.findOne({
      Request: UserId,
      Result: CurrentToken,
      execute: (id) =>
        sql`SELECT current_token_hash AS hash, current_token_iat::text AS iat FROM users WHERE id = ${id}`
    })

    /**
     * Reserves the issue time of the user's next token: never earlier than `now` and always after the previous
     * token's, so two logins in the same second still produce two different tokens.
     */
    const reserveTokenIat = SqlSchema.single({
      Request: Schema.Struct({ id: UserId, now: Schema.Number }),
      Result: Schema.Struct({ iat: Schema.NumberFromString }),
      execute: ({ id, now }) =>
        sql`
          UPDATE users SET current_token_iat = GREATEST(${now}, COALESCE(current_token_iat, 0) + 1)
          WHERE id = ${id} RETURNING current_token_iat::text AS iat`
    })

    /** Makes `hash` the user's one valid token, unless a newer login already reserved a later issue time. */
    const setCurrentToken = SqlSchema.findOne({
      Request: Schema.Struct({ id: UserId, hash: Schema.String, iat: Schema.Number }),
      Result: Schema.Struct({ previous: Schema.NullOr(Schema.String) }),
      execute: ({ hash, iat, id }) =>
        sql`
          WITH prev AS (SELECT current_token_hash FROM users WHERE id = ${id} FOR UPDATE)
          UPDATE users SET current_token_hash = ${hash}
          FROM prev WHERE users.id = ${id} AND users.current_token_iat = ${iat}
          RETURNING prev.current_token_hash AS previous`
    })

    const insertApiKey = SqlSchema.single({
      Request: Schema.Struct({
        id: ApiKeyId,
        userId: UserId,
        name: Schema.String,
        keyHash: Schema.String,
        prefix: Schema.String,
        last4: Schema.String
      }),
      Result: Schema.Struct({ createdAt: Schema.DateFromSelf }),
      execute: (row) => sql`INSERT INTO api_keys ${sql.insert(row)} RETURNING created_at`
    })

    const listApiKeys = SqlSchema.findAll({
      Request: UserId,
      Result: ApiKeyRecord,
      execute: (userId) =>
        sql`
          SELECT id, user_id, name, prefix, last4, created_at, last_used_at FROM api_keys
          WHERE user_id = ${userId} AND revoked_at IS NULL ORDER BY created_at DESC, id`
    })

    const revokeApiKey = SqlSchema.findOne({
      Request: Schema.Struct({ id: ApiKeyId, userId: UserId }),
      Result: Schema.Struct({ id: ApiKeyId }),
      execute: ({ id, userId }) =>
        sql`
          UPDATE api_keys SET revoked_at = now()
          WHERE id = ${id} AND user_id = ${userId} AND revoked_at IS NULL RETURNING id`
    })

    /** The live key with this hash and its owner; marks it used. */
    const useApiKey = SqlSchema.findOne({
      Request: Schema.String,
      Result: Schema.Struct({ id: ApiKeyId, userId: UserId, phone: Schema.String }),
      execute: (keyHash) =>
        sql`
          UPDATE api_keys k SET last_used_at = now()
          FROM users u
          WHERE k.key_hash = ${keyHash} AND k.revoked_at IS NULL AND u.id = k.user_id
          RETURNING k.id, k.user_id, u.phone`
    })

    return {
      upsertByPhone: (phone: string) =>
        upsertByPhone({ id: UserId.random(), phone }).pipe(Effect.orDie, Effect.withSpan("IdentityRepo.upsertByPhone")),
      findUser: (id: UserId) => findUser(id).pipe(Effect.orDie),
      currentToken: (id: UserId) =>
        currentToken(id).pipe(
          Effect.map(Option.flatMap((row) => Option.fromNullable(row.hash))),
          Effect.orDie
        ),
      reserveTokenIat: (id: UserId, now: number) =>
        reserveTokenIat({ id, now }).pipe(Effect.map((row) => row.iat), Effect.orDie),
      setCurrentToken: (id: UserId, hash: string, iat: number) =>
        setCurrentToken({ id, hash, iat }).pipe(Effect.orDie),
      insertApiKey: (row: Parameters<typeof insertApiKey>[0]) =>
        insertApiKey(row).pipe(Effect.map((inserted) => inserted.createdAt), Effect.orDie),
      listApiKeys: (userId: UserId) => listApiKeys(userId).pipe(Effect.orDie),
      revokeApiKey: (id: ApiKeyId, userId: UserId) =>
        revokeApiKey({ id, userId }).pipe(Effect.map(Option.isSome), Effect.orDie),
      useApiKey: (keyHash: string) => useApiKey(keyHash).pipe(Effect.orDie)
    } as const
  })
}) {}

/** Secrets the platform makes for itself on first start (the JWT key without `JWT_SECRET`), shared by every runner. */
export class PlatformSecretsRepo extends Effect.Service<PlatformSecretsRepo>()("atrium/identity/PlatformSecretsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const stored = SqlSchema.single({
      Request: Schema.String,
      Result: Schema.Struct({ value: Schema.String }),
      execute: (name) => sql`SELECT value FROM platform_secrets WHERE name = ${name}`
    })
    return {
      /** The secret named `name`: `candidate` if none was stored yet, else the one stored first (by any runner). */
      keep: (name: string, candidate: string) =>
        Effect.gen(function*() {
          yield* sql`INSERT INTO platform_secrets (name, value) VALUES (${name}, ${candidate}) ON CONFLICT (name) DO NOTHING`
          return (yield* stored(name)).value
        }).pipe(Effect.orDie)
    } as const
  })
}) {}
