import { assert, describe, it } from "@effect/vitest"
import { RunId } from "../../src/runtime/Domain.js"
import type { TurnRow } from "../../src/sessions/Rows.js"
import { contextOf } from "../../src/sessions/Window.js"

/** The context window of a session's model call, on its own: the newest whole turns within the budget. */

const turn = (n: number, chars: number): TurnRow => ({
  turn: n,
  parentTurn: n > 1 ? n - 1 : null,
  runId: RunId.make(`run_${n}`),
  messages: [{ role: "user", content: `message ${n}` }, { role: "assistant", content: `answer ${n}` }],
  chars,
  status: "completed",
  createdAt: new Date(0)
})

describe("session context window", () => {
  it("keeps every turn that fits, oldest first, without a note", () => {
    const context = contextOf([turn(1, 10), turn(2, 10)], 100)
    assert.deepStrictEqual(context.map((m) => m.content), ["message 1", "answer 1", "message 2", "answer 2"])
  })

  it("keeps the newest whole turns within the budget and says how many were left out", () => {
    const context = contextOf([turn(1, 50), turn(2, 40), turn(3, 40)], 100)
    assert.deepStrictEqual(context.map((m) => [m.role, m.content]), [
      ["system", "1 earlier turns of this conversation are not shown (context limit)."],
      ["user", "message 2"],
      ["assistant", "answer 2"],
      ["user", "message 3"],
      ["assistant", "answer 3"]
    ])
  })

  it("never cuts a turn in half: one that does not fit ends the window", () => {
    const context = contextOf([turn(1, 10), turn(2, 200), turn(3, 10)], 100)
    assert.deepStrictEqual(context.map((m) => m.content), [
      "2 earlier turns of this conversation are not shown (context limit).",
      "message 3",
      "answer 3"
    ])
  })
})
