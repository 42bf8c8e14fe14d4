import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer } from "effect"
import { AtriumApi } from "../Api.js"
import { AuthenticationLive } from "../identity/Authentication.js"
import { Distillations } from "./Distillations.js"
import { pageOf } from "../platform/http/Lists.js"
import { Caller } from "../identity/Domain.js"

export const DistillationsHttp = HttpApiBuilder.group(AtriumApi, "distillations", (handlers) =>
  Effect.gen(function*() {
    const distillations = yield* Distillations
    return handlers
      .handle("start", ({ payload }) => Effect.flatMap(Caller, (caller) => distillations.start(caller, payload)))
      .handle("message", ({ path, payload }) =>
        Effect.flatMap(Caller, (caller) => distillations.continue(caller, { sessionId: path.id, message: payload.message })))
      .handle("get", ({ path }) => Effect.flatMap(Caller, (caller) => distillations.get(caller, path.id)))
      .handle("list", ({ urlParams }) =>
        Effect.flatMap(Effect.flatMap(Caller, distillations.list), (all) => pageOf(all.data, urlParams, (summary) => summary.sessionId)))
  })).pipe(Layer.provide(AuthenticationLive))

export const DistillationsHttpLive = DistillationsHttp.pipe(Layer.provide(Distillations.Default))
