import { createChallenge, verifySolution } from "altcha-lib"
import { Clock, Duration, Effect, Option, Redacted } from "effect"
import * as Crypto from "node:crypto"
import { KeyValue } from "../platform/KeyValue.js"
import { ChallengeConfig } from "./Config.js"
import { JwtKey } from "./Tokens.js"

/**
 * The login page's proof of work (spec 4.7's optional challenge): self-hosted ALTCHA, nothing leaves the platform.
 * A challenge is signed with an HMAC key (`SMS_CHALLENGE_KEY`, or one derived from the JWT key so a cluster shares
 * it without another setting), expires after `SMS_CHALLENGE_TTL`, and a solution is accepted once: its signature is
 * remembered in the key-value store until the challenge would have expired anyway.
 */
export class LoginChallenge extends Effect.Service<LoginChallenge>()("atrium/identity/LoginChallenge", {
  effect: Effect.gen(function*() {
    const config = yield* ChallengeConfig
    const { key } = yield* JwtKey
    const kv = yield* KeyValue
    const hmacKey = Option.match(config.hmacKey, {
      onSome: Redacted.value,
      onNone: () => Crypto.createHmac("sha256", key).update("atrium-login-challenge").digest("hex")
    })

    const create = Effect.fn("LoginChallenge.create")(function*() {
      const expires = new Date((yield* Clock.currentTimeMillis) + Duration.toMillis(config.lifetime))
      return yield* Effect.promise(() => createChallenge({ hmacKey, maxNumber: config.maxNumber, expires }))
    })

    /** Whether `payload` (the widget's base64 JSON) solves a live challenge of ours not used before; uses it up. */
    const redeem = Effect.fn("LoginChallenge.redeem")(function*(payload: string) {
      const valid = yield* Effect.tryPromise(() => verifySolution(payload, hmacKey, true)).pipe(
        Effect.orElseSucceed(() => false)
      )
      if (!valid) return false
      const signature = (JSON.parse(Buffer.from(payload, "base64").toString("utf8")) as { signature: string }).signature
      return yield* kv.setIfAbsent(`sms:challenge:${signature}`, "1", config.lifetime)
    })

    return { create, redeem } as const
  }),
  dependencies: [JwtKey.Default, ChallengeConfig.Default]
}) {}
