import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { UserId } from "../../src/platform/Ids.js"
import { canDelegateTo, canRun, changeAccess, isCreator } from "../../src/agents/Policy.js"
import { mayRunVersion, runsDraft } from "../../src/runs/Policy.js"
import { canUseMemoryOf } from "../../src/memory/Policy.js"
import { canSee } from "../../src/market/Policy.js"

/** Who may use, change and delegate to an expert (src/agents/Policy.ts), and the rules built on them. */
const draft = { ownerId: "usr_a", publishedVersion: null }
const published = { ownerId: "usr_a", publishedVersion: 3 }

describe("agents policy", () => {
  it.effect("a subagent is the caller's own or a published one; someone else's draft is not delegable", () =>
    Effect.sync(() => {
      assert.isTrue(canDelegateTo("usr_a", draft))
      assert.isTrue(canDelegateTo("usr_b", published))
      assert.isFalse(canDelegateTo("usr_b", draft))
    }))

  it.effect("an expert runs as its creator's draft, or for anyone else as its published version", () =>
    Effect.sync(() => {
      assert.isTrue(runsDraft("usr_a", published))
      assert.isFalse(runsDraft("usr_b", published))
      assert.isTrue(canRun("usr_b", published))
      assert.isFalse(canRun("usr_b", draft))
      assert.isFalse(mayRunVersion("usr_b", published))
    }))

  it.effect("a change by anyone but the creator: 403 for a published expert, hidden for a draft", () =>
    Effect.sync(() => {
      assert.strictEqual(changeAccess("usr_a", draft), "creator")
      assert.strictEqual(changeAccess("usr_b", published), "forbidden")
      assert.strictEqual(changeAccess("usr_b", draft), "hidden")
      assert.isFalse(isCreator("usr_b", published))
    }))

  it.effect("memory and the marketplace follow the same rule", () =>
    Effect.sync(() => {
      assert.isFalse(canUseMemoryOf({ accountId: UserId.make("usr_b"), endUserId: "" }, draft))
      assert.isTrue(canUseMemoryOf({ accountId: UserId.make("usr_b"), endUserId: "eu" }, published))
      assert.isFalse(canSee(undefined, draft))
      assert.isFalse(canSee("usr_b", draft))
      assert.isTrue(canSee("usr_a", draft))
      assert.isTrue(canSee(undefined, published))
    }))
})
