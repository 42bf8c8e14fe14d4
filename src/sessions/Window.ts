import type * as Prompt from "@effect/ai/Prompt"
import type { TurnRow } from "./Rows.js"

/**
 * The context window of a session: which of its turns the next turn's prompt shows. Pure, so the rules are tested
 * on their own (test/sessions/window.test.ts); the session keeps its history trimmed by the same budget.
 */

/** What the window reads of a turn: its messages and their size. */
type WindowTurn = Pick<TurnRow, "chars" | "messages">

/**
 * History as the model sees it: the newest whole turns within the context budget, and a note of what was left out
 * (`earlier`: turns before `turns` that were left out already).
 */
export const contextOf = (turns: ReadonlyArray<WindowTurn>, budgetChars: number, earlier = 0): Array<Prompt.MessageEncoded> => {
  const kept: Array<WindowTurn> = []
  let chars = 0
  for (let i = turns.length - 1; i >= 0; i--) {
    const turn = turns[i]!
    if (chars + turn.chars > budgetChars) break
    chars += turn.chars
    kept.unshift(turn)
  }
  const dropped = earlier + turns.length - kept.length
  const note: Array<Prompt.MessageEncoded> = dropped > 0
    ? [{ role: "system", content: `${dropped} earlier turns of this conversation are not shown (context limit).` }]
    : []
  return [...note, ...kept.flatMap((turn) => turn.messages)]
}

/** Lets go of the oldest turns that no longer fit `budgetChars` (the prompt would leave them out), counting them. */
export const trimToBudget = <T extends { readonly chars: number }>(kept: { turns: Array<T>; earlier: number }, budgetChars: number) => {
  let chars = kept.turns.reduce((sum, t) => sum + t.chars, 0)
  while (kept.turns.length > 0 && chars > budgetChars) {
    chars -= kept.turns.shift()!.chars
    kept.earlier += 1
  }
  return kept
}
