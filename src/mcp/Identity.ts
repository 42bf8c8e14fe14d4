import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect, Option } from "effect"
import { API_KEY_PREFIX, ApiKeys } from "../identity/ApiKeys.js"
import { Tokens } from "../identity/Tokens.js"
import { type Credential, credentialOf } from "../platform/http/Bearer.js"
import { type McpCaller, ToolFailure } from "./Tool.js"

export const SIGN_IN_REQUIRED =
  "Sign in required: send Authorization: Bearer <login token or API key (sk_...)>, or the browser cookie token."

const refused = (message: string) => new ToolFailure({ type: "unauthorized", message })


/**
 * Who a tool-server request acts for, resolved the way `/v1` resolves it (`PlatformAuthentication`): an API key
 * stands for its owner, a login token for its user. Nothing is looked up until a tool needs a caller, so
 * `initialize`, `tools/list` and `browse_marketplace` cost no token check (and renew no login session).
 */
export class McpIdentity extends Effect.Service<McpIdentity>()("atrium/mcp/McpIdentity", {
  effect: Effect.gen(function*() {
    const tokens = yield* Tokens
    const apiKeys = yield* ApiKeys

    const resolve = Effect.fn("Mcp.identity")(function*(credential: Credential) {
      switch (credential._tag) {
        case "None":
          return yield* refused(SIGN_IN_REQUIRED)
        // An `Authorization` header of another scheme is a credential gone wrong, not an absent one: falling back to
        // the cookie, or to no one, would act for someone the caller did not name (`Bearer.ts`).
        case "Malformed":
          return yield* refused("Use the Authorization scheme Bearer: Authorization: Bearer <login token or API key>.")
        case "Cookie":
        case "Bearer": {
          if (credential.value.startsWith(API_KEY_PREFIX)) {
            // The cookie belongs to a browser login; an API key there is a mistake, and accepting it would invite one.
            if (credential._tag === "Cookie") {
              return yield* refused("Send an API key as Authorization: Bearer, not as a cookie.")
            }
            const key = yield* apiKeys.authenticate(credential.value)
            if (Option.isNone(key)) return yield* refused("Invalid or revoked API key: sign in again or create a new key.")
            return { userId: key.value.userId, via: "api_key", apiKeyId: key.value.id } satisfies McpCaller
          }
          const identity = yield* tokens.authenticate(credential.value).pipe(
            Effect.mapError(() => refused("Invalid or expired login token: sign in again."))
          )
          return { userId: identity.userId, via: "login", apiKeyId: undefined } satisfies McpCaller
        }
      }
    })

    /** The request's caller, looked up at most once however many tools the request calls. */
    const forRequest = (request: HttpServerRequest.HttpServerRequest) => Effect.cached(resolve(credentialOf(request)))

    return { forRequest } as const
  }),
  dependencies: [Tokens.Default, ApiKeys.Default]
}) {}
