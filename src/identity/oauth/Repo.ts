import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Schema } from "effect"
import { AppId, UserId } from "../../platform/Ids.js"
import type { Micros } from "../../platform/Money.js"
import { ClientId, TokenFamilyId } from "../Domain.js"

/** jsonb as node-postgres (an array) or PGlite (sometimes its text) hands it over. */
const JsonStrings = Schema.Union(Schema.Array(Schema.String), Schema.parseJson(Schema.Array(Schema.String)))

/** A third-party app (spec 2.6): its client credentials (the secret only hashed) and where it may be redirected. */
const AppRowSchema = Schema.Struct({
  id: AppId,
  ownerId: UserId,
  name: Schema.String,
  clientId: ClientId,
  clientSecretHash: Schema.String,
  redirectUris: JsonStrings,
  /** Micro-credits an app may charge one user per day; none when uncapped. */
  dailyCapPerUser: Schema.NullOr(Schema.BigInt),
  createdAt: Schema.DateFromSelf
})

export type AppRow = typeof AppRowSchema.Type

const APP_COLUMNS = "id, owner_id, name, client_id, client_secret_hash, redirect_uris, daily_cap_per_user::text, created_at"

/** A refresh token rotated by this request, with its grant's state. */
const RotatedRow = Schema.Struct({
  familyId: TokenFamilyId,
  userId: UserId,
  scope: Schema.String,
  expiresAt: Schema.DateFromSelf,
  revoked: Schema.Boolean
})

/** OAuth apps and the grants issued to them (families of rotating refresh tokens). SQL errors are defects here. */
export class OAuthRepo extends Effect.Service<OAuthRepo>()("atrium/identity/OAuthRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const appBy = <Id extends string>(column: "id" | "client_id", id: Schema.Schema<Id, string>) =>
      SqlSchema.findOne({
        Request: id,
        Result: AppRowSchema,
        execute: (value) => sql`SELECT ${sql.literal(APP_COLUMNS)} FROM apps WHERE ${sql(column)} = ${value}`
      })
    const findById = appBy("id", AppId)
    const findByClientId = appBy("client_id", ClientId)

    const insertApp = SqlSchema.single({
      Request: Schema.Struct({
        id: AppId,
        ownerId: UserId,
        name: Schema.String,
        clientId: ClientId,
        clientSecretHash: Schema.String,
        redirectUris: Schema.Array(Schema.String)
      }),
      Result: AppRowSchema,
      execute: (app) =>
        sql`
          INSERT INTO apps (id, owner_id, name, client_id, client_secret_hash, redirect_uris)
          VALUES (${app.id}, ${app.ownerId}, ${app.name}, ${app.clientId}, ${app.clientSecretHash},
                  ${JSON.stringify(app.redirectUris)}::jsonb)
          RETURNING ${sql.literal(APP_COLUMNS)}`
    })

    const listApps = SqlSchema.findAll({
      Request: Schema.String,
      Result: AppRowSchema,
      execute: (ownerId) => sql`SELECT ${sql.literal(APP_COLUMNS)} FROM apps WHERE owner_id = ${ownerId} ORDER BY created_at, id`
    })

    const updateApp = (id: AppId, patch: {
      readonly name?: string | undefined
      readonly redirectUris?: ReadonlyArray<string> | undefined
      readonly dailyCapPerUser?: Micros | null | undefined
    }) =>
      SqlSchema.findOne({
        Request: Schema.Void,
        Result: AppRowSchema,
        execute: () =>
          sql`
            UPDATE apps SET
              name = COALESCE(${patch.name ?? null}, name),
              redirect_uris = COALESCE(${patch.redirectUris === undefined ? null : JSON.stringify(patch.redirectUris)}::jsonb, redirect_uris),
              daily_cap_per_user = CASE WHEN ${patch.dailyCapPerUser !== undefined} THEN ${
            patch.dailyCapPerUser === undefined || patch.dailyCapPerUser === null ? null : String(patch.dailyCapPerUser)
          }::bigint ELSE daily_cap_per_user END,
              updated_at = now()
            WHERE id = ${id} RETURNING ${sql.literal(APP_COLUMNS)}`
      })(undefined)

    const insertFamily = (familyId: TokenFamilyId, appId: AppId, userId: UserId) =>
      sql`INSERT INTO oauth_families (id, app_id, user_id) VALUES (${familyId}, ${appId}, ${userId})`

    const revokeFamily = (familyId: TokenFamilyId, now: Date) =>
      sql`UPDATE oauth_families SET revoked_at = COALESCE(revoked_at, ${now}) WHERE id = ${familyId}`

    const insertRefreshToken = (token: {
      readonly tokenHash: string
      readonly familyId: TokenFamilyId
      readonly appId: AppId
      readonly userId: UserId
      readonly scope: string
      readonly expiresAt: Date
    }) =>
      sql`
        INSERT INTO oauth_refresh_tokens (token_hash, family_id, app_id, user_id, scope, expires_at)
        VALUES (${token.tokenHash}, ${token.familyId}, ${token.appId}, ${token.userId}, ${token.scope}, ${token.expiresAt})`

    /** Marks the token rotated; none when it is unknown, another app's, or rotated already. */
    const rotate = (tokenHash: string, appId: AppId, now: Date) =>
      SqlSchema.findOne({
        Request: Schema.Void,
        Result: RotatedRow,
        execute: () =>
          sql`
            UPDATE oauth_refresh_tokens t SET rotated_at = ${now}
            FROM oauth_families f
            WHERE t.token_hash = ${tokenHash} AND t.app_id = ${appId} AND t.rotated_at IS NULL AND f.id = t.family_id
            RETURNING t.family_id, t.user_id, t.scope, t.expires_at, (f.revoked_at IS NOT NULL) AS revoked`
      })(undefined)

    /** Revokes the grant a token of this app belongs to (a rotated token presented again: it leaked). */
    const revokeFamilyOf = (tokenHash: string, appId: AppId, now: Date) =>
      sql`
        UPDATE oauth_families SET revoked_at = COALESCE(revoked_at, ${now})
        WHERE id = (SELECT family_id FROM oauth_refresh_tokens WHERE token_hash = ${tokenHash} AND app_id = ${appId})`

    return {
      findApp: (id: AppId) => Effect.orDie(findById(id)),
      findAppByClientId: (clientId: ClientId) => Effect.orDie(findByClientId(clientId)),
      insertApp: (app: Parameters<typeof insertApp>[0]) => Effect.orDie(insertApp(app)),
      listApps: (ownerId: UserId) => Effect.orDie(listApps(ownerId)),
      updateApp: (id: AppId, patch: Parameters<typeof updateApp>[1]) => Effect.orDie(updateApp(id, patch)),
      insertFamily: (familyId: TokenFamilyId, appId: AppId, userId: UserId) =>
        Effect.orDie(Effect.asVoid(insertFamily(familyId, appId, userId))),
      revokeFamily: (familyId: TokenFamilyId, now: Date) => Effect.orDie(Effect.asVoid(revokeFamily(familyId, now))),
      insertRefreshToken: (token: Parameters<typeof insertRefreshToken>[0]) =>
        Effect.orDie(Effect.asVoid(insertRefreshToken(token))),
      rotate: (tokenHash: string, appId: AppId, now: Date) => Effect.orDie(rotate(tokenHash, appId, now)),
      revokeFamilyOf: (tokenHash: string, appId: AppId, now: Date) =>
        Effect.orDie(Effect.asVoid(revokeFamilyOf(tokenHash, appId, now)))
    } as const
  })
}) {}

