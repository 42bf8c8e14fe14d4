import { Clock, Effect, Option } from "effect"
import { type OAuthApp, OAuthApps } from "../identity/oauth/Apps.js"
import type { AppId } from "../platform/Ids.js"
import { type MeterRow, MetersRepo } from "./MetersRepo.js"

/**
 * Apps and meters as `POST /v1/events` reads them: on every event, so they are cached for a moment instead of read
 * twice per charge. A change made through this process is visible at once (the writer invalidates); one made by
 * another process within `TTL_MS`.
 *
 * One entry per app and event name holds both (issue 45 item 3): a charge finds what it needs in one plain map read,
 * with no effect of its own (an Effect `Cache.get` per read was about a dozen runtime steps, two per charge).
 */
const TTL_MS = 2_000
const CAPACITY = 100_000

/** What `POST /v1/events` needs of an app and one of its meters: the app (none: gone) and the meter (none: no such). */
export interface Priced {
  readonly app: Option.Option<OAuthApp>
  readonly meter: Option.Option<MeterRow>
}

export class AppDirectory extends Effect.Service<AppDirectory>()("atrium/billing/AppDirectory", {
  effect: Effect.gen(function*() {
    const repo = yield* MetersRepo
    const oauthApps = yield* OAuthApps
    const entries = new Map<string, { readonly appId: AppId; readonly priced: Priced; readonly until: number }>()
    /** The keys cached for each app, so a change to the app drops them all without walking the map. */
    const byApp = new Map<AppId, Set<string>>()
    /**
     * Bumped by every invalidation of the app: a lookup that began before a change and ends after it must not put
     * what it read (the old app or meter) back in the cache.
     */
    const generations = new Map<AppId, number>()

    const keyOf = (appId: AppId, eventName: string) => `${appId}\u0000${eventName}`
    const forget = (key: string, appId: AppId) => {
      entries.delete(key)
      const keys = byApp.get(appId)
      keys?.delete(key)
      if (keys?.size === 0) byApp.delete(appId)
    }
    const keep = (appId: AppId, key: string, priced: Priced, until: number) => {
      if (entries.size >= CAPACITY) {
        const oldest = entries.entries().next()
        if (oldest.done !== true) forget(oldest.value[0], oldest.value[1].appId)
      }
      entries.set(key, { appId, priced, until })
      const keys = byApp.get(appId)
      if (keys === undefined) byApp.set(appId, new Set([key]))
      else keys.add(key)
    }

    const lookup = (appId: AppId, eventName: string, key: string) =>
      Effect.gen(function*() {
        const generation = generations.get(appId) ?? 0
        const app = yield* oauthApps.find(appId)
        const meter = Option.isNone(app) ? Option.none<MeterRow>() : yield* repo.findMeter(appId, eventName)
        const priced: Priced = { app, meter }
        if ((generations.get(appId) ?? 0) === generation) keep(appId, key, priced, (yield* Clock.currentTimeMillis) + TTL_MS)
        return priced
      })

    return {
      /** The app `appId` and its meter `eventName`, from the cache when it holds them. */
      priced: (appId: AppId, eventName: string): Effect.Effect<Priced> =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          const key = keyOf(appId, eventName)
          const entry = entries.get(key)
          if (entry !== undefined && entry.until > now) return Effect.succeed(entry.priced)
          if (entry !== undefined) forget(key, appId)
          return lookup(appId, eventName, key)
        }),
      /** After an app or any of its meters changed. */
      invalidate: (appId: AppId) =>
        Effect.sync(() => {
          generations.set(appId, (generations.get(appId) ?? 0) + 1)
          for (const key of byApp.get(appId) ?? []) entries.delete(key)
          byApp.delete(appId)
        })
    } as const
  }),
  dependencies: [OAuthApps.Default, MetersRepo.Default]
}) {}
