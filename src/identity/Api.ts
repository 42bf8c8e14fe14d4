import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { InvalidRequest, NotFound, RateLimited } from "../platform/Errors.js"
import { ApiKeyId } from "../platform/Ids.js"
import { ChallengeRequired, ChallengeSchema, InvalidCode, SmsNotDelivered, UserAuthentication } from "./Domain.js"

export const Phone = Schema.String.pipe(
  Schema.pattern(/^\+[1-9]\d{6,14}$/, {
    message: () => "phone must be an E.164 number such as +8613800000000"
  })
)

export const SendCodeResult = Schema.Struct({
  sent: Schema.Literal(true),
  expires_in: Schema.Int,
  retry_after: Schema.Int
})

export const LoginResult = Schema.Struct({ token: Schema.String, newUser: Schema.Boolean })

export const ApiKeyCreated = Schema.Struct({
  id: ApiKeyId,
  name: Schema.String,
  key: Schema.String,
  created_at: Schema.String
})

export const ApiKeySummary = Schema.Struct({
  id: ApiKeyId,
  name: Schema.String,
  prefix: Schema.String,
  last4: Schema.String,
  created_at: Schema.String,
  last_used_at: Schema.NullOr(Schema.String)
})

/** Spec 4.7: no token needed. */
export class AuthApi extends HttpApiGroup.make("auth")
  .add(
    HttpApiEndpoint.post("sendCode", "/api/auth/sms/sendCode")
      .setPayload(Schema.Struct({
        phone: Phone,
        /** The ALTCHA widget's base64 payload: a solution of a challenge from `GET /api/auth/challenge`. */
        challenge: Schema.optional(Schema.String.pipe(Schema.maxLength(4096)))
      }))
      .addSuccess(SendCodeResult)
      .addError(RateLimited)
      .addError(ChallengeRequired)
      .addError(SmsNotDelivered)
      .annotate(
        OpenApi.Description,
        "Send a 6-digit login code by SMS (60 s cooldown per phone). Past SMS_CHALLENGE_AFTER codes for the phone " +
          "today or from the client this hour, `challenge` must carry a solved proof of work (403 challenge_required)."
      )
  )
  .add(
    HttpApiEndpoint.get("challenge", "/api/auth/challenge")
      .addSuccess(ChallengeSchema)
      .annotate(OpenApi.Description, "A proof-of-work challenge (ALTCHA) for sendCode; solve it and send the payload.")
  )
  .add(
    HttpApiEndpoint.post("login", "/api/auth/login")
      .setPayload(Schema.Struct({
        phone: Phone,
        code: Schema.String.pipe(Schema.maxLength(32)),
        /** Asked for (403 challenge_required) once the phone's code drew many wrong guesses: as for sendCode. */
        challenge: Schema.optional(Schema.String.pipe(Schema.maxLength(4096)))
      }))
      .addSuccess(LoginResult)
      .addError(InvalidCode)
      .addError(ChallengeRequired)
      .annotate(
        OpenApi.Description,
        "Log in with the code; returns a JWT and sets the `token` cookie. Once the phone's code drew SMS_MAX_ATTEMPTS " +
          "wrong guesses (from anyone), `challenge` must carry a solved proof of work (403 challenge_required)."
      )
  )
  .annotate(OpenApi.Title, "Login")
  .annotate(OpenApi.Description, "SMS login: send a code (behind a proof-of-work challenge when asked), exchange it for a JWT.")
{}

/** Spec 4.7, 4.8: a login token is required. */
export class AccountApi extends HttpApiGroup.make("account")
  .add(
    HttpApiEndpoint.post("refresh", "/api/token/refresh")
      .addSuccess(Schema.Struct({ token: Schema.String }))
      .annotate(
        OpenApi.Description,
        "Issue a new JWT that replaces the current one (and the `token` cookie, when the request came with it)."
      )
  )
  .add(
    // Spec 4.7 names GET. It stays for bearer callers (no browser sends a bearer on its own); a GET with the cookie
    // alone is 405 at the edge, since a cross-site link would otherwise void the victim's token (issue 26 item 4).
    HttpApiEndpoint.get("refreshWithBearer", "/api/token/refresh")
      .addSuccess(Schema.Struct({ token: Schema.String }))
      .annotate(OpenApi.Description, "As POST, for a bearer token only: with the cookie alone it is 405 (use POST).")
  )
  .add(
    HttpApiEndpoint.post("createApiKey", "/api/user/apiKey/create")
      // Every field is optional, so an empty body (read as null) is a valid request too.
      .setPayload(Schema.NullOr(Schema.Struct({ name: Schema.optional(Schema.String.pipe(Schema.maxLength(100))) })))
      .addSuccess(ApiKeyCreated)
      .annotate(OpenApi.Description, "Create an API key; the key is shown in this response only.")
  )
  .add(
    HttpApiEndpoint.post("listApiKeys", "/api/user/apiKey/list")
      .addSuccess(Schema.Struct({ data: Schema.Array(ApiKeySummary) }))
  )
  .add(
    HttpApiEndpoint.post("deleteApiKey", "/api/user/apiKey/delete")
      .setPayload(Schema.Struct({ id: ApiKeyId.unchecked.pipe(Schema.maxLength(64)) }))
      .addSuccess(Schema.Struct({ deleted: Schema.Literal(true) }))
      .addError(NotFound)
  )
  .middleware(UserAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Account")
  .annotate(OpenApi.Description, "The logged-in user's JWT refresh and API keys.")
{}
