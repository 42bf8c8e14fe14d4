import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option } from "effect"
import { NotFound } from "../../src/platform/Errors.js"
import { UserId } from "../../src/platform/Ids.js"
import { allowed, policy, policyRequire, policyUse, withSystemActor } from "../../src/platform/Policy.js"
import { canUpdateApp } from "../../src/identity/Policy.js"

/**
 * The policy mechanism (issue 49, src/platform/Policy.ts): a refused rule answers exactly as a missing thing does,
 * and an operation that requires a rule does not compile without a `policyUse` granting it.
 */
const missing = () => new NotFound({ message: "No thing t_1." })
const update = Effect.succeed("updated").pipe(policyRequire("thing.update"))

describe("Policy", () => {
  it.effect("a granted rule runs the operation that requires it", () =>
    Effect.gen(function*() {
      const result = yield* update.pipe(policyUse(policy("thing.update", Effect.succeed(true), missing)))
      assert.strictEqual(result, "updated")
    }))

  it.effect("a refused rule is the thing's 'not found', and the operation never runs", () =>
    Effect.gen(function*() {
      let ran = false
      const operation = Effect.sync(() => (ran = true)).pipe(policyRequire("thing.update"))
      const exit = yield* Effect.exit(operation.pipe(policyUse(policy("thing.update", Effect.succeed(false), missing))))
      assert.deepStrictEqual(exit, Exit.fail(missing()))
      assert.isFalse(ran)
    }))

  it.effect("the platform acting for itself needs no caller's permit", () =>
    Effect.map(update.pipe(withSystemActor("thing.update")), (result) => assert.strictEqual(result, "updated")))

  it("an operation that requires a rule cannot run without it (checked by the compiler)", () => {
    // @ts-expect-error the permit of "thing.update" is still required
    const ungranted: Effect.Effect<string> = update
    // @ts-expect-error another rule's permit does not stand in for it
    const wrong: Effect.Effect<string, NotFound> = update.pipe(policyUse(policy("thing.delete", Effect.succeed(true), missing)))
    assert.isDefined(ungranted)
    assert.isDefined(wrong)
  })

  it.effect("allowed: a row the rule refuses answers like no row", () =>
    Effect.gen(function*() {
      const refused = yield* Effect.flip(allowed(Option.some({ ownerId: "usr_b" }), (row) => row.ownerId === "usr_a", missing))
      const absent = yield* Effect.flip(allowed(Option.none<{ ownerId: string }>(), () => true, missing))
      assert.deepStrictEqual(refused, absent)
      assert.deepStrictEqual(yield* allowed(Option.some({ ownerId: "usr_a" }), (row) => row.ownerId === "usr_a", missing), { ownerId: "usr_a" })
    }))

  it.effect("an OAuth app is changed by its creator only; another's answers as a missing one", () =>
    Effect.gen(function*() {
      const app = Option.some({ ownerId: UserId.make("usr_a") })
      assert.deepStrictEqual(yield* canUpdateApp("usr_a", "app_1", app), { rule: "identity.app.update" })
      const other = yield* Effect.flip(canUpdateApp("usr_b", "app_1", app))
      const none = yield* Effect.flip(canUpdateApp("usr_b", "app_1", Option.none()))
      assert.deepStrictEqual(other, new NotFound({ message: "No app app_1." }))
      assert.deepStrictEqual(other, none)
    }))
})
