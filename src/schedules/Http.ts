import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer } from "effect"
import { AtriumApi } from "../Api.js"
import { AuthenticationLive } from "../identity/Authentication.js"
import { Schedules } from "./Schedules.js"
import { Caller } from "../identity/Domain.js"

export const SchedulesHttp = HttpApiBuilder.group(AtriumApi, "schedules", (handlers) =>
  Effect.gen(function*() {
    const schedules = yield* Schedules
    return handlers
      .handle("create", ({ payload }) => Effect.flatMap(Caller, (caller) => schedules.create(caller, payload)))
      .handle("list", ({ urlParams }) => Effect.flatMap(Caller, (caller) => schedules.list(caller, urlParams)))
      .handle("get", ({ path }) => Effect.flatMap(Caller, (caller) => schedules.get(caller, path.id)))
      .handle("update", ({ path, payload }) => Effect.flatMap(Caller, (caller) => schedules.update(caller, path.id, payload)))
      .handle("delete", ({ path }) => Effect.flatMap(Caller, (caller) => schedules.remove(caller, path.id)))
      .handle("pause", ({ path }) => Effect.flatMap(Caller, (caller) => schedules.pause(caller, path.id)))
      .handle("resume", ({ path }) => Effect.flatMap(Caller, (caller) => schedules.resume(caller, path.id)))
  })).pipe(Layer.provide(AuthenticationLive))

export const SchedulesHttpLive = SchedulesHttp.pipe(Layer.provide(Schedules.Default))
