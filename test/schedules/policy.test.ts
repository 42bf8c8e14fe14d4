import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import type { CallerIdentity } from "../../src/identity/Domain.js"
import { InvalidRequest } from "../../src/platform/Errors.js"
import { UserId } from "../../src/platform/Ids.js"
import { runsAs } from "../../src/schedules/Policy.js"

/** Whom a new schedule runs as (src/schedules/Policy.ts): the header's end user, or the body's without a header. */
const account = UserId.make("usr_a")
const caller = (endUser?: string): CallerIdentity => ({
  userId: account,
  via: endUser === undefined ? "login" : "api_key",
  apiKeyId: Option.none(),
  endUserId: endUser === undefined ? Option.none() : Option.some(endUser)
})

describe("schedules policy", () => {
  it.effect("an API key acting for one end user cannot schedule runs as another", () =>
    Effect.gen(function*() {
      const refused = yield* Effect.flip(runsAs(caller("eu_1"), "eu_2"))
      assert.deepStrictEqual(refused, new InvalidRequest({ message: "end_user_id: must match the X-End-User-Id header when both are given." }))
    }))

  it.effect("the header names the end user; the same name in the body is accepted", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* runsAs(caller("eu_1"), undefined), { accountId: account, endUserId: "eu_1" })
      assert.deepStrictEqual(yield* runsAs(caller("eu_1"), "eu_1"), { accountId: account, endUserId: "eu_1" })
    }))

  it.effect("without a header, the body may name the end user; naming none is the account itself", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* runsAs(caller(), "eu_9"), { accountId: account, endUserId: "eu_9" })
      assert.deepStrictEqual(yield* runsAs(caller(), undefined), { accountId: account, endUserId: "" })
    }))
})
