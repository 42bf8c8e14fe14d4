import { Effect, Option } from "effect"
import { NotFound } from "../../platform/Errors.js"
import { AppId, randomBase62, type UserId } from "../../platform/Ids.js"
import { ClientId } from "../Domain.js"
import type { Micros } from "../../platform/Money.js"
import { sha256 } from "../Tokens.js"
import { type AppRow, OAuthRepo } from "./Repo.js"
import { isAppCreator } from "../Policy.js"
import { allowed, policyRequire } from "../../platform/Policy.js"

/** A third-party app as the rest of the platform sees it (its secret only hashed). */
export type OAuthApp = AppRow

/**
 * Third-party apps (spec 2.6) for the domains that manage or bill them: the `apps` routes (billing's group, with the
 * app's meters) and `POST /v1/events`. The apps table is identity's; other folders reach it only through here. An app
 * is its creator's: someone else's answers exactly like one that does not exist.
 */
export class OAuthApps extends Effect.Service<OAuthApps>()("atrium/identity/OAuthApps", {
  effect: Effect.gen(function*() {
    const repo = yield* OAuthRepo

    /** A new app and its client secret, shown this once (only its hash is kept). */
    const create = Effect.fn("OAuthApps.create")(function*(ownerId: UserId, fields: { readonly name: string; readonly redirectUris: ReadonlyArray<string> }) {
      const clientSecret = `cs_${randomBase62(40)}`
      const app = yield* repo.insertApp({
        id: AppId.random(),
        ownerId,
        name: fields.name,
        // 24 characters, not 20: the app's public name in the authorization flows.
        clientId: ClientId.make(`cid_${randomBase62(24)}`),
        clientSecretHash: sha256(clientSecret),
        redirectUris: fields.redirectUris
      })
      return { app, clientSecret }
    })

    const owned = Effect.fn("OAuthApps.owned")(function*(ownerId: UserId, id: AppId) {
      const app = yield* repo.findApp(id)
      return yield* allowed(app, (row) => isAppCreator(ownerId, row), () => new NotFound({ message: `No app ${id}.` }))
    })

    /** Changes app `id`: only under `canUpdateApp` (identity's Policy), which the caller grants with `policyUse`. */
    const update = Effect.fn("OAuthApps.update")(function*(id: AppId, patch: {
      readonly name?: string | undefined
      readonly redirectUris?: ReadonlyArray<string> | undefined
      readonly dailyCapPerUser?: Micros | null | undefined
    }) {
      const updated = yield* repo.updateApp(id, patch)
      // Deleted since the policy read it: as if it never was.
      return yield* Option.match(updated, { onNone: () => Effect.fail(new NotFound({ message: `No app ${id}.` })), onSome: Effect.succeed })
    }, policyRequire("identity.app.update"))

    return {
      create,
      owned,
      update,
      list: (ownerId: UserId) => repo.listApps(ownerId),
      /** Any app by its id, whoever owns it: for `POST /v1/events`, which the app itself calls. */
      find: (id: AppId) => repo.findApp(id)
    } as const
  }),
  dependencies: [OAuthRepo.Default]
}) {}
