import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer } from "effect"
import { AtriumApi } from "../Api.js"
import { AuthenticationLive } from "../identity/Authentication.js"
import { Evolution } from "./Evolution.js"
import { pageOf } from "../platform/http/Lists.js"
import { Caller } from "../identity/Domain.js"

export const EvolutionHttp = HttpApiBuilder.group(AtriumApi, "evolution", (handlers) =>
  Effect.gen(function*() {
    const evolution = yield* Evolution
    return handlers
      .handle("suggestions", ({ path, urlParams }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          const all = yield* evolution.list(path.identifier, caller.userId)
          return { identifier: all.identifier, ...yield* pageOf(all.data, urlParams, (suggestion) => suggestion.id) }
        }))
      .handle("accept", ({ path }) => Effect.flatMap(Caller, (caller) => evolution.accept(path.id, caller.userId)))
      .handle("dismiss", ({ path }) => Effect.flatMap(Caller, (caller) => evolution.dismiss(path.id, caller.userId)))
      .handle("stats", ({ path }) => Effect.flatMap(Caller, (caller) => evolution.stats(path.identifier, caller.userId)))
  })).pipe(Layer.provide(AuthenticationLive))

export const EvolutionHttpLive = EvolutionHttp.pipe(Layer.provide(Evolution.Default))
