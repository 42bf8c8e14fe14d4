import { InvalidRequest } from "../platform/Errors.js"
import type { Fence } from "../platform/cluster/Fences.js"
import type { Micros } from "../platform/Money.js"
import { entryKey, type EntryInfo, type HoldChange, type HoldState, type KeyedEntry, type NewEntry, type WalletState } from "./Repo.js"
import { InsufficientCredits, DailyCapExceeded, IdempotencyConflict, StaleOwner, WalletFailure, Movement } from "./Domain.js"

/**
 * What a wallet decides, apart from how it is asked (the entity) and how it commits (the committer): given its
 * state, the entries already in the ledger under the keys asked for, and what each capped app charged today, the
 * outcome of each request in order, the entries to write and the next state. Pure: tested on its own
 * (test/billing/decide.test.ts).
 */


/** One thing a wallet is asked to do: a request, or one charge of a `Charges` request. */
export type Item =
  | {
    readonly tag: "Charge"
    readonly amount: Micros
    readonly entry: EntryInfo
    readonly dailyCap: Micros | null
    /** The fence of the entity it is made for (a session's), checked by the commit (`NewEntry.callerFence`). */
    readonly fence?: Fence | null | undefined
    /** The hold whose settle posts it: refused when its run's next owner voided that hold first (`Release.final`). */
    readonly hold?: string | undefined
  }
  | { readonly tag: "Credit"; readonly amount: Micros; readonly entry: EntryInfo }
  | { readonly tag: "Balance" }
  /**
   * Places or extends the hold `hold` to `amount` in all, as far as the available credits (balance - held) allow,
   * and keeps it `ttlMs` from now. A hold already at `amount` or above only lives longer: asking again resumes it.
   */
  | { readonly tag: "Hold"; readonly hold: string; readonly amount: Micros; readonly ttlMs: number }
  /**
   * Voids what is left of the hold `hold` (its run posts its charges right after, as `Charge` items). `final`: the
   * run's next owner voids the hold of a run that will not go on (a cut session turn), and nothing more may be posted
   * to it or held under its id for `ttlMs` (`DecideInput.voided`): a settle of the cut run that arrives after this is
   * refused its new charges, so what its next owner counted in the ledger after the void stays the run's cost.
   */
  | { readonly tag: "Release"; readonly hold: string; readonly final?: boolean | undefined; readonly ttlMs?: number | undefined }

export type Refusal = InsufficientCredits | DailyCapExceeded | IdempotencyConflict | InvalidRequest | StaleOwner

/**
 * The largest balance a wallet holds: 2^53 - 1 micro-credits (about 9 billion credits). Past it a balance no longer
 * prints as an exact JSON number, and further on the `bigint` column overflows (a 500): a credit that would cross it
 * is refused as the caller's bad input (issue 26 item 4), before anything is written.
 */
export const MAX_BALANCE: Micros = BigInt(Number.MAX_SAFE_INTEGER)
/** A hold's decision: the hold's amount now (0: none could be placed), and the wallet's balance and held after it. */
export interface Held {
  readonly hold: Micros
  readonly balance: Micros
  readonly held: Micros
  /**
   * When the wallet voids the hold unless its run asks for it again (milliseconds since the epoch; `now` when it
   * holds nothing): a run that goes on past half of its hold's life asks again, so a live run's hold never lapses.
   */
  readonly expiresAt: number
}
export type Decision =
  | { readonly ok: true; readonly value: Movement | { readonly balance: Micros; readonly held: Micros } | Held | { readonly released: Micros } }
  | { readonly ok: false; readonly error: Refusal | WalletFailure }

export const DAY_MS = 86_400_000

export interface DecideInput {
  readonly userId: string
  readonly state: WalletState
  readonly items: ReadonlyArray<Item>
  /** Entries already in the ledger under the keys of `items` (by anyone): those replay. */
  readonly prior: ReadonlyMap<string, KeyedEntry>
  /** What each capped app charged this user today (UTC), for the apps known so far. */
  readonly spentToday: ReadonlyMap<string, Micros>
  /** The time of the decision, in milliseconds. */
  readonly now: number
  /** Keys of charges whose caller's fence the database refused: refused, never written. */
  readonly staleCallers?: ReadonlySet<string> | undefined
  /**
   * Holds voided by their run's next owner (`Release.final`), until when (ms): a later charge of their settles is
   * refused (`StaleOwner`) unless it replays, and a later `Hold` of the same id holds nothing. Kept in the wallet
   * entity's memory, not in the database: a wallet that restarts or moves meanwhile forgets them.
   */
  readonly voided?: ReadonlyMap<string, number> | undefined
}

export interface Decided {
  readonly entries: ReadonlyArray<NewEntry>
  readonly decisions: ReadonlyArray<Decision>
  /** Keys of charges refused for the balance or the cap: if one was used before, it replays instead. */
  readonly refused: ReadonlyArray<{ readonly scope: string; readonly key: string }>
  readonly next: WalletState
  /** `spentToday` after these charges. */
  readonly spent: ReadonlyMap<string, Micros>
  /** The holds these items (or their expiry) changed, to write with the entries. */
  readonly holds: ReadonlyArray<HoldChange>
  /** `voided` after these items, when they changed it (a final release), without the entries past their time. */
  readonly voided?: ReadonlyMap<string, number> | undefined
}

/** Decides `items` in order against the state: charges within the balance and the app's daily cap, credits, balances. */
export const decideItems = ({ items, now, prior, spentToday, staleCallers, state, userId, voided }: DecideInput): Decided => {
  const day = Math.floor(now / DAY_MS)
  let balance = state.balance
  let seq = state.seq
  const known = new Map(prior)
  const spent = new Map(spentToday)
  const entries: Array<NewEntry> = []
  const decisions: Array<Decision> = []
  /** Keys of charges refused for the balance or the cap: if one was used before, it replays instead. */
  const refused: Array<{ readonly scope: string; readonly key: string }> = []
  const createdAt = new Date(now)
  // The holds as they stand at `now`: an expired hold is void (its run died, or outlived it), its credits available.
  const holds = new Map<string, HoldState>()
  const changed = new Set<string>()
  let held = 0n
  /** `voided`, copied on the first final release of these items. */
  let closed: Map<string, number> | undefined
  const isVoided = (hold: string) => ((closed ?? voided)?.get(hold) ?? 0) > now
  if (state.holds !== undefined) {
    for (const [id, hold] of state.holds) {
      if (hold.expiresAt > now) {
        holds.set(id, hold)
        held += hold.amount
      } else {
        changed.add(id)
      }
    }
  }

  /**
   * The answer to a key already in the ledger: a replay, unless the entry is this very call's (`origin`): a message
   * sent again after a cut whose first delivery was committed answers as that first delivery would have, since its
   * client sent the key once (spec 2.3: `idempotent_replay` only when the request repeated an earlier key).
   */
  const replayOf = (prior: KeyedEntry, origin: string | null | undefined): Decision =>
    prior.userId !== userId
      ? {
        ok: false,
        // The key is not echoed: the test that no number of the other user leaks reads this text (a random
        // key containing "97" made it fail now and then).
        error: new IdempotencyConflict({ message: "This idempotency key was already used for another user.", final: true })
      }
      : {
        ok: true,
        value: {
          amount: prior.amount < 0n ? -prior.amount : prior.amount,
          balance: prior.balanceAfter,
          replay: prior.origin === null || prior.origin !== origin
        }
      }

  for (const item of items) {
    if (item.tag === "Balance") {
      decisions.push({ ok: true, value: { balance, held } })
      continue
    }
    if (item.tag === "Hold" && isVoided(item.hold)) {
      // The run this hold was for was cut and its next owner voided the hold: it holds nothing any more.
      decisions.push({ ok: true, value: { hold: 0n, balance, held, expiresAt: now } })
      continue
    }
    if (item.tag === "Hold") {
      const existing = holds.get(item.hold)?.amount ?? 0n
      const wanted = item.amount > existing ? item.amount - existing : 0n
      // Never more than is available: a hold is credits no one else may take, so it must exist.
      const available = balance - held
      const extra = wanted < available ? wanted : available > 0n ? available : 0n
      const amount = existing + extra
      const expiresAt = amount > 0n ? now + item.ttlMs : now
      if (amount > 0n) {
        holds.set(item.hold, { amount, expiresAt })
        changed.add(item.hold)
      }
      held += extra
      decisions.push({ ok: true, value: { hold: amount, balance, held, expiresAt } })
      continue
    }
    if (item.tag === "Release") {
      const released = holds.get(item.hold)?.amount ?? 0n
      if (holds.delete(item.hold)) changed.add(item.hold)
      held -= released
      if (item.final === true) {
        if (closed === undefined) closed = new Map([...(voided ?? new Map<string, number>())].filter(([, until]) => until > now))
        closed.set(item.hold, now + (item.ttlMs ?? 0))
      }
      decisions.push({ ok: true, value: { released } })
      continue
    }
    const { amount, entry } = item
    const id = entryKey(entry.scope, entry.key)
    const found = known.get(id)
    if (found !== undefined) {
      decisions.push(replayOf(found, entry.origin))
      continue
    }
    let signed = amount
    if (item.tag === "Charge" && staleCallers?.has(id) === true) {
      decisions.push({ ok: false, error: new StaleOwner({ message: "The runner that asked for this charge no longer owns its session." }) })
      continue
    }
    if (item.tag === "Charge" && item.hold !== undefined && isVoided(item.hold)) {
      // Looked up as a refused one is: a charge posted before the void replays instead.
      refused.push(entry)
      decisions.push({ ok: false, error: new StaleOwner({ message: "This run's hold was voided by its next owner; the run no longer posts to it." }) })
      continue
    }
    if (item.tag === "Charge") {
      const cap = item.dailyCap
      const appSpent = entry.appId === null ? 0n : (spent.get(entry.appId) ?? 0n)
      if (cap !== null && appSpent + amount > cap) {
        refused.push(entry)
        decisions.push({
          ok: false,
          error: new DailyCapExceeded({
            message: "This app reached its daily spending cap for you; it resets at 00:00 UTC.",
            retry_after: Math.ceil(((day + 1) * DAY_MS - now) / 1000)
          })
        })
        continue
      }
      // Available = balance - held: what the holds reserve is no one else's (no overdraft, migration 0020).
      if (balance - held < amount) {
        refused.push(entry)
        decisions.push({ ok: false, error: new InsufficientCredits({ message: "Not enough credits for this charge." }) })
        continue
      }
      // Only an app whose day was loaded from the ledger is counted on here: starting an untracked app at 0
      // would forget what it charged before this entity woke, and a cap set later would be overshot. An
      // untracked app's total is read from the ledger (which holds this charge by then) when a cap appears.
      if (entry.appId !== null && spent.has(entry.appId)) spent.set(entry.appId, appSpent + amount)
      signed = -amount
    } else if (balance + amount > MAX_BALANCE) {
      decisions.push({
        ok: false,
        error: new InvalidRequest({ message: "amount would take the balance past the largest a wallet holds (9007199254.740991 credits)." })
      })
      continue
    }
    balance += signed
    seq += 1n
    const callerFence = item.tag === "Charge" ? item.fence ?? null : null
    entries.push({ ...entry, seq, amount: signed, balanceAfter: balance, createdAt, ...(callerFence === null ? {} : { callerFence }) })
    // A second request with the same key in this batch replays the first.
    known.set(id, { userId, scope: entry.scope, key: entry.key, amount: signed, balanceAfter: balance, origin: entry.origin ?? null })
    decisions.push({ ok: true, value: { amount, balance, replay: false } })
  }
  // A state that never had holds stays without them (the decision's unit tests compare states as they are).
  const next: WalletState = state.holds === undefined && holds.size === 0 ? { balance, seq } : { balance, seq, holds }
  const holdChanges = [...changed].map((hold): HoldChange => ({ hold, state: holds.get(hold) ?? null }))
  return { entries, decisions, refused, next, spent, holds: holdChanges, ...(closed === undefined ? {} : { voided: closed }) }
}
