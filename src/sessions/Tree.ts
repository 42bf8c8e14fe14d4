import type * as Prompt from "@effect/ai/Prompt"
import type { TreeTurn } from "./Rows.js"
import { preview } from "./Views.js"

/**
 * A session's history as a tree (issue 44, docs/sessions.md "Branches"): every turn has a parent turn, and every read
 * follows the path from the root to a leaf. Pure, so the rules are tested on their own; `SessionsRepo.tree` reads the
 * turns (a fork's own, and the path it shares with its origin).
 */
export interface Tree {
  /** The turn the session was forked at (its own turns are numbered after it), or null. */
  readonly forkTurn: number | null
  /** Every turn the session sees, by number: its own, and for a fork the path root → `forkTurn` of its origin. */
  readonly turns: ReadonlyMap<number, TreeTurn>
}

/** The turns from the root to `leaf` (none for a null leaf or one the tree does not have). */
export const pathTo = (tree: Tree, leaf: number | null): Array<TreeTurn> => {
  const path: Array<TreeTurn> = []
  let at = leaf
  // Parents are numbered before their children, so the walk ends; the guard is for a damaged row.
  while (at !== null && path.length <= tree.turns.size) {
    const turn = tree.turns.get(at)
    if (turn === undefined) break
    path.push(turn)
    at = turn.parentTurn
  }
  return path.reverse()
}

/**
 * The visible tree out of the rows a fork chain holds: the session's own turns (`own`), and of its origins only the
 * path from the root to the turn it was forked at (a branch of the origin is not the fork's).
 */
export const visibleTree = (forkTurn: number | null, own: ReadonlyArray<TreeTurn>, inherited: ReadonlyArray<TreeTurn>): Tree => {
  const turns = new Map<number, TreeTurn>()
  if (forkTurn !== null) {
    const origin = new Map(inherited.map((turn) => [turn.turn, turn] as const))
    for (const turn of pathTo({ forkTurn: null, turns: origin }, forkTurn)) turns.set(turn.turn, turn)
  }
  for (const turn of own) turns.set(turn.turn, turn)
  return { forkTurn, turns }
}

/** The messages of a path, in order (what `GET /v1/sessions/:id` shows and the model reads). */
export const messagesOf = (path: ReadonlyArray<TreeTurn>): Array<Prompt.MessageEncoded> => path.flatMap((turn) => turn.messages)

/** The user's message of a turn (what regenerate sends again). */
export const userMessageOf = (turn: TreeTurn): string | undefined => {
  const user = turn.messages.find((message) => message.role === "user")
  if (user === undefined) return undefined
  return typeof user.content === "string"
    ? user.content
    : (user.content as ReadonlyArray<{ type: string; text?: string }>).flatMap((part) => part.type === "text" ? [part.text ?? ""] : []).join("")
}

/** The tree as `GET /v1/sessions/:id/tree` answers it: every turn with its parent and children, oldest first. */
export const treeView = (tree: Tree, leaf: number | null) => {
  const children = new Map<number, Array<number>>()
  for (const turn of tree.turns.values()) {
    if (turn.parentTurn === null) continue
    const list = children.get(turn.parentTurn) ?? []
    list.push(turn.turn)
    children.set(turn.parentTurn, list)
  }
  const turns = [...tree.turns.values()].sort((a, b) => a.turn - b.turn).map((turn) => {
    const user = userMessageOf(turn) ?? ""
    return {
      turn: turn.turn,
      parent_turn: turn.parentTurn,
      status: turn.status,
      message_preview: user.length > 140 ? `${user.slice(0, 139)}…` : user,
      answer_preview: preview(turn.messages.filter((message) => message.role === "assistant")),
      children: (children.get(turn.turn) ?? []).sort((a, b) => a - b)
    }
  })
  return { leaf, turns }
}

/** The deepest turn under `turn` following its newest children: where switching to `turn` lands. */
export const newestLeafUnder = (tree: Tree, turn: number): number => {
  const children = new Map<number, number>()
  for (const t of tree.turns.values()) {
    if (t.parentTurn !== null && (children.get(t.parentTurn) ?? -1) < t.turn) children.set(t.parentTurn, t.turn)
  }
  let at = turn
  for (let next = children.get(at); next !== undefined; next = children.get(at)) at = next
  return at
}
