import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer } from "effect"
import { AtriumApi } from "../Api.js"
import { Capabilities } from "./Capabilities.js"
import { makeHealthCheck } from "./Health.js"

export const HealthHttp = HttpApiBuilder.group(AtriumApi, "health", (handlers) =>
  Effect.map(makeHealthCheck, (check) => handlers.handle("health", () => check))).pipe(Layer.provide(Capabilities.Default))
