import { Cache, Effect, Option } from "effect"
import { type OAuthApp, OAuthApps } from "../identity/oauth/Apps.js"
import type { AppId } from "../platform/Ids.js"
import { type MeterRow, MetersRepo } from "./MetersRepo.js"

/**
 * Apps and meters as `POST /v1/events` reads them: on every event, so they are cached for a moment instead of read
 * twice per charge. A change made through this process is visible at once (the writer invalidates); one made by
 * another process within `TTL`.
 */
const TTL = "2 seconds"

export class AppDirectory extends Effect.Service<AppDirectory>()("atrium/billing/AppDirectory", {
  effect: Effect.gen(function*() {
    const repo = yield* MetersRepo
    const oauthApps = yield* OAuthApps
    const apps = yield* Cache.make({ capacity: 10_000, timeToLive: TTL, lookup: (id: AppId) => oauthApps.find(id) })
    const meters = yield* Cache.make({
      capacity: 100_000,
      timeToLive: TTL,
      lookup: (key: string) => {
        const [appId, eventName] = JSON.parse(key) as [string, string]
        return repo.findMeter(appId, eventName)
      }
    })
    return {
      app: (id: AppId): Effect.Effect<Option.Option<OAuthApp>> => apps.get(id),
      meter: (appId: AppId, eventName: string): Effect.Effect<Option.Option<MeterRow>> =>
        meters.get(JSON.stringify([appId, eventName])),
      /** After an app or any of its meters changed. */
      invalidate: (appId: AppId) =>
        Effect.gen(function*() {
          yield* apps.invalidate(appId)
          for (const key of yield* meters.keys) {
            if ((JSON.parse(key) as [string, string])[0] === appId) yield* meters.invalidate(key)
          }
        })
    } as const
  }),
  dependencies: [OAuthApps.Default, MetersRepo.Default]
}) {}
