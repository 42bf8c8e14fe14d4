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
 *
 * A session is a tree of turns (issue 44): what is kept is the path to one turn (`leaf`). A turn that continues
 * another branch (regenerate, edit, a `previous_response_id`, a switched leaf) reads its path from the database.
 */
export class KeptHistory {
  private kept: { turns: Array<EncodedTurn>; earlier: number; leaf: number | null } | undefined

  constructor(
    private readonly read: (leaf: number | null) => Effect.Effect<ReadonlyArray<{ readonly chars: number; readonly messages: unknown }>>,
    private readonly budgetChars: number
  ) {}

  /** The history of the path to `leaf` as the prompt of a turn after it shows it (`contextOf`). */
  prompt(leaf: number | null): Effect.Effect<Array<Prompt.MessageEncoded>> {
    const kept = this.kept
    if (kept !== undefined && kept.leaf === leaf) return Effect.sync(() => this.show(kept))
    return Effect.map(this.read(leaf), (rows) => {
      const loaded = {
        ...trimToBudget({ turns: rows.map((turn) => ({ chars: turn.chars, json: JSON.stringify(turn.messages) })), earlier: 0 }, this.budgetChars),
        leaf
      }
      this.kept = loaded
      return this.show(loaded)
    })
  }

  /**
   * Adds the turn `number` that just ended after `parent`; the kept path is forgotten if it was another branch's
   * (the next turn reads its own), and nothing is kept before the history was first read.
   */
  remember(turn: EncodedTurn, number: number, parent: number | null): void {
    if (this.kept === undefined) return
    if (this.kept.leaf !== parent) {
      this.kept = undefined
      return
    }
    this.kept.turns.push(turn)
    this.kept.leaf = number
    trimToBudget(this.kept, this.budgetChars)
  }

  private show(kept: { turns: Array<EncodedTurn>; earlier: number }) {
    return contextOf(kept.turns.map((turn) => ({ chars: turn.chars, messages: JSON.parse(turn.json) })), this.budgetChars, kept.earlier)
  }
}
