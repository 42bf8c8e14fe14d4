import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer } from "effect"
import { AtriumApi } from "../Api.js"
import { AuthenticationLive } from "../identity/Authentication.js"
import { type EnvironmentRow, Environments } from "./Environments.js"
import { ownedBy } from "./Policy.js"
import { pageOf } from "../platform/http/Lists.js"
import { Caller } from "../identity/Domain.js"

/** A value's last four characters tell two keys apart; under 12 characters that would be a third of it. */
export const maskValue = (value: string) => (value.length >= 12 ? `****${value.slice(-4)}` : "****")

const view = (environment: EnvironmentRow) => ({
  id: environment.id,
  name: environment.name,
  description: environment.description,
  packages: environment.packages,
  env: Object.fromEntries(Object.entries(environment.env).map(([name, value]) => [name, maskValue(value)])),
  files: environment.files,
  setup_script: environment.setupScript,
  created_at: environment.createdAt.toISOString(),
  updated_at: environment.updatedAt.toISOString()
})

export const EnvironmentsHttp = HttpApiBuilder.group(AtriumApi, "environments", (handlers) =>
  Effect.gen(function*() {
    const environments = yield* Environments
    const partition = Effect.map(Caller, ownedBy)
    return handlers
      .handle("create", ({ payload }) =>
        Effect.map(Effect.flatMap(partition, (p) => environments.create(p, payload)), view))
      .handle("list", ({ urlParams }) =>
        Effect.flatMap(Effect.flatMap(partition, environments.list), (all) => pageOf(all.data.map(view), urlParams, (environment) => environment.id)))
      .handle("get", ({ path }) => Effect.map(Effect.flatMap(partition, (p) => environments.get(p, path.id)), view))
      .handle("update", ({ path, payload }) =>
        Effect.map(Effect.flatMap(partition, (p) => environments.update(p, path.id, payload)), view))
      .handle("delete", ({ path }) =>
        Effect.as(Effect.flatMap(partition, (p) => environments.remove(p, path.id)), { id: path.id, deleted: true as const }))
  })).pipe(Layer.provide(AuthenticationLive))

export const EnvironmentsHttpLive = EnvironmentsHttp.pipe(Layer.provide(Environments.Default))
