import type * as Prompt from "@effect/ai/Prompt"
import { Effect } from "effect"
import { contextOf, trimToBudget } from "./Window.js"

/** A turn of the history an active session keeps: its messages as JSON, and `chars` (the budget's measure). */
export interface EncodedTurn {
  readonly chars: number
  readonly json: string
}

/**
 * The history an active session keeps for its next turn's prompt: read from the database the first time a turn needs
 * it, then added to turn by turn; the newest turns within the context budget, and how many older ones were left out.
 * Each turn's messages are kept as their JSON (what `chars` measures), not decoded: a string instead of a tree of
 * objects per message and part while the session waits (issue 28, heap per session); a turn decodes them once. A
 * class, so its methods are the process's, not closures every active session keeps.
 */
export class KeptHistory {
  private kept: { turns: Array<EncodedTurn>; earlier: number } | undefined

  constructor(
    private readonly read: Effect.Effect<ReadonlyArray<{ readonly chars: number; readonly messages: unknown }>>,
    private readonly budgetChars: number
  ) {}

  /** The history as the next turn's prompt shows it (`contextOf`). */
  prompt(): Effect.Effect<Array<Prompt.MessageEncoded>> {
    const kept = this.kept
    if (kept !== undefined) return Effect.sync(() => this.show(kept))
    return Effect.map(this.read, (rows) => {
      const loaded = trimToBudget({ turns: rows.map((turn) => ({ chars: turn.chars, json: JSON.stringify(turn.messages) })), earlier: 0 }, this.budgetChars)
      this.kept = loaded
      return this.show(loaded)
    })
  }

  /** Adds the turn that just ended; nothing before the history was first read (that read will include it). */
  remember(turn: EncodedTurn): void {
    if (this.kept === undefined) return
    this.kept.turns.push(turn)
    trimToBudget(this.kept, this.budgetChars)
  }

  private show(kept: { turns: Array<EncodedTurn>; earlier: number }) {
    return contextOf(kept.turns.map((turn) => ({ chars: turn.chars, messages: JSON.parse(turn.json) })), this.budgetChars, kept.earlier)
  }
}
