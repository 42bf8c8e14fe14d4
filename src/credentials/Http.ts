import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer } from "effect"
import { AtriumApi } from "../Api.js"
import { AuthenticationLive } from "../identity/Authentication.js"
import { Credentials } from "./Credentials.js"
import { ownedBy } from "./Policy.js"
import { pageOf } from "../platform/http/Lists.js"
import { Caller } from "../identity/Domain.js"

export const CredentialsHttp = HttpApiBuilder.group(AtriumApi, "credentials", (handlers) =>
  Effect.gen(function*() {
    const credentials = yield* Credentials
    const owner = Effect.map(Caller, ownedBy)
    return handlers
      .handle("create", ({ payload }) => Effect.flatMap(owner, (o) => credentials.create(o, payload.server_url, payload.token)))
      .handle("list", ({ urlParams }) =>
        Effect.flatMap(Effect.flatMap(owner, credentials.list), (data) => pageOf(data, urlParams, (credential) => credential.id)))
      .handle("delete", ({ path }) =>
        Effect.as(Effect.flatMap(owner, (o) => credentials.remove(o, path.id)), { id: path.id, deleted: true as const }))
  })).pipe(Layer.provide(AuthenticationLive))

export const CredentialsHttpLive = CredentialsHttp.pipe(Layer.provide(Credentials.Default))
