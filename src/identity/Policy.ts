import { Effect, Option } from "effect"
import { NotFound } from "../platform/Errors.js"
import { type Permit, policy } from "../platform/Policy.js"
import type { AppRow } from "./oauth/Repo.js"

/**
 * Who reaches what of identity (issue 49: the domain's rules in one file).
 *
 * - The partition every per-user row is kept in (account, and the end user an API key names with `X-End-User-Id`)
 *   is `partitionOf` (Partition.ts); each domain's `ownedBy` names it for that domain's rows.
 * - An API key is its account's: `IdentityRepo` lists and revokes keys only with their owner's id, so anyone else's
 *   key is `No API key …`.
 * - An OAuth app is its creator's: they list, change and meter it; anyone else's is `No app …`, as if it did not
 *   exist. The app itself (client credentials) reaches only its own events (`AppCaller`).
 */
export const isAppCreator = (accountId: string, app: Pick<AppRow, "ownerId">): boolean => app.ownerId === accountId

/** The rule `OAuthApps.update` requires. */
export type UpdateApp = Permit<"identity.app.update">

/** May `accountId` change the app found as `id`? Only its creator; a missing app and another's answer alike. */
export const canUpdateApp = (accountId: string, id: string, found: Option.Option<Pick<AppRow, "ownerId">>) =>
  policy(
    "identity.app.update",
    Effect.succeed(Option.exists(found, (app) => isAppCreator(accountId, app))),
    () => new NotFound({ message: `No app ${id}.` })
  )
