import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import type { CallerIdentity } from "../../src/identity/Domain.js"
import { UserId } from "../../src/platform/Ids.js"
import { accessOf, creatorReader, endUserReader, readerOf } from "../../src/traces/Policy.js"

/**
 * Who reads which traces (src/traces/Policy.ts; docs/traces.md): a caller their own runs; acting as the account
 * itself, also the creator's view of their experts' runs; an end user only their own, never another end user's.
 */
const account = UserId.make("usr_creator")
const caller = (endUser?: string): CallerIdentity => ({
  userId: account,
  via: "api_key",
  apiKeyId: Option.none(),
  endUserId: endUser === undefined ? Option.none() : Option.some(endUser)
})

describe("traces policy", () => {
  it.effect("the account itself reads its own runs and, as their creator, its experts' runs", () =>
    Effect.sync(() => assert.deepStrictEqual(readerOf(caller()), { accountId: account, endUserId: "", asCreator: true })))

  it.effect("an end user reads only their own runs: no creator's view", () =>
    Effect.sync(() => assert.deepStrictEqual(readerOf(caller("eu_1")), { accountId: account, endUserId: "eu_1", asCreator: false })))

  it.effect("the account narrowed to one of its end users sees that end user's runs only", () =>
    Effect.sync(() =>
      assert.deepStrictEqual(endUserReader(readerOf(caller()), "eu_1"), Option.some({ accountId: account, endUserId: "eu_1", asCreator: false }))))

  it.effect("an end user cannot ask for another end user's runs (nor widen to the creator's view)", () =>
    Effect.sync(() => {
      assert.isTrue(Option.isNone(endUserReader(readerOf(caller("eu_1")), "eu_2")))
      assert.deepStrictEqual(endUserReader(readerOf(caller("eu_1")), "eu_1"), Option.some(readerOf(caller("eu_1"))))
    }))

  it.effect("a buyer's run listed to the creator says only 'creator', never whose", () =>
    Effect.sync(() => {
      const reader = readerOf(caller())
      assert.strictEqual(accessOf(reader, { payerId: account, endUserId: "" }), "own")
      assert.strictEqual(accessOf(reader, { payerId: "usr_buyer", endUserId: "" }), "creator")
      assert.strictEqual(accessOf(reader, { payerId: account, endUserId: "eu_1" }), "creator")
    }))

  it.effect("a dataset's row reads a run as its expert's creator", () =>
    Effect.sync(() => assert.deepStrictEqual(creatorReader(account), { accountId: account, endUserId: "", asCreator: true })))
})
