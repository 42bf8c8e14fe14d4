import { assert, describe, it } from "@effect/vitest"
import { DAY_MS, decideItems, type Item, MAX_BALANCE } from "../../src/billing/Decide.js"
import { entryKey, type EntryInfo, type KeyedEntry } from "../../src/billing/Repo.js"
import { AppId } from "../../src/platform/Ids.js"

/** The wallet's decision on its own (issue 12 item 8): no entity, no database, no clock. */

const NOW = 20_000 * DAY_MS + 3_600_000
const entry = (key: string, more: Partial<EntryInfo> = {}): EntryInfo => ({
  kind: "consume",
  scope: "credit:usr_a",
  key,
  appId: null,
  event: null,
  metadata: null,
  description: null,
  ...more
})
const charge = (amount: bigint, key: string, more: Partial<EntryInfo> = {}, dailyCap: bigint | null = null): Item => ({
  tag: "Charge",
  amount,
  entry: entry(key, more),
  dailyCap
})
const decide = (
  balance: bigint,
  items: ReadonlyArray<Item>,
  prior: ReadonlyMap<string, KeyedEntry> = new Map(),
  spentToday: ReadonlyMap<string, bigint> = new Map()
) => decideItems({ userId: "usr_a", state: { balance, seq: 7n }, items, prior, spentToday, now: NOW })

describe("wallet decide", () => {
  it("charges in order within the balance, never below zero, in exact micro-credits", () => {
    const decided = decide(1_500_000n, [charge(1_000_000n, "a"), charge(600_000n, "b"), charge(500_000n, "c")])
    assert.deepStrictEqual(decided.decisions.map((d) => d.ok), [true, false, true])
    assert.strictEqual(decided.decisions[1]!.ok === false && decided.decisions[1]!.error._tag, "InsufficientCredits")
    assert.deepStrictEqual(decided.next, { balance: 0n, seq: 9n })
    assert.deepStrictEqual(decided.entries.map((e) => [e.seq, e.amount, e.balanceAfter]), [[8n, -1_000_000n, 500_000n], [9n, -500_000n, 0n]])
    assert.deepStrictEqual(decided.refused, [entry("b")])
  })

  it("a key used before replays its first outcome and moves nothing; another user's key is a conflict", () => {
    const prior = new Map<string, KeyedEntry>([
      [entryKey("credit:usr_a", "mine"), { userId: "usr_a", scope: "credit:usr_a", key: "mine", amount: -250_000n, balanceAfter: 750_000n, origin: null }],
      [entryKey("credit:usr_a", "theirs"), { userId: "usr_b", scope: "credit:usr_a", key: "theirs", amount: -1n, balanceAfter: 9n, origin: null }]
    ])
    const decided = decide(2_000_000n, [charge(250_000n, "mine"), charge(1n, "theirs")], prior)
    assert.deepStrictEqual(decided.decisions[0], { ok: true, value: { amount: 250_000n, balance: 750_000n, replay: true } })
    assert.strictEqual(decided.decisions[1]!.ok === false && decided.decisions[1]!.error._tag, "IdempotencyConflict")
    assert.deepStrictEqual(decided.entries, [])
    assert.deepStrictEqual(decided.next, { balance: 2_000_000n, seq: 7n })
  })

  it("the same key twice in one batch charges once; the second replays the first", () => {
    const decided = decide(1_000_000n, [charge(300_000n, "k"), charge(300_000n, "k")])
    assert.deepStrictEqual(decided.decisions.map((d) => d.ok && "replay" in d.value && d.value.replay), [false, true])
    assert.strictEqual(decided.entries.length, 1)
    assert.strictEqual(decided.next.balance, 700_000n)
  })

  it("an app's daily cap counts what it charged today; past it the charge is refused with the seconds to midnight UTC", () => {
    const app = { scope: "app_1", appId: AppId.make("app_1"), kind: "event", event: "call" }
    const decided = decide(
      10_000_000n,
      [charge(400_000n, "e1", app, 1_000_000n), charge(400_000n, "e2", app, 1_000_000n)],
      new Map(),
      new Map([["app_1", 500_000n]])
    )
    assert.deepStrictEqual(decided.decisions.map((d) => d.ok), [true, false])
    const refused = decided.decisions[1]!
    assert.isTrue(refused.ok === false && refused.error._tag === "DailyCapExceeded")
    if (refused.ok === false && refused.error._tag === "DailyCapExceeded") {
      assert.strictEqual(refused.error.retry_after, (DAY_MS - 3_600_000) / 1000)
    }
    assert.strictEqual(decided.spent.get("app_1"), 900_000n)
  })

  it("credits add, balances read the running balance", () => {
    const decided = decide(0n, [
      { tag: "Credit", amount: 5_000_000n, entry: entry("grant-1", { kind: "grant", scope: "grant" }) },
      { tag: "Balance" },
      charge(1_000_000n, "after")
    ])
    assert.deepStrictEqual(decided.decisions[1], { ok: true, value: { balance: 5_000_000n, held: 0n } })
    assert.deepStrictEqual(decided.next, { balance: 4_000_000n, seq: 9n })
  })

  it("a credit past the largest balance (2^53 - 1 micro-credits) is refused as invalid_request and writes nothing", () => {
    const credit = (amount: bigint, key: string): Item => ({ tag: "Credit", amount, entry: entry(key, { kind: "grant", scope: "grant" }) })
    const decided = decide(MAX_BALANCE - 10n, [credit(10n, "fits"), credit(1n, "over"), credit(999_999_999_999_999_999n, "far")])
    assert.deepStrictEqual(decided.decisions.map((d) => d.ok), [true, false, false])
    for (const d of decided.decisions.slice(1)) assert.strictEqual(d.ok === false && d.error._tag, "InvalidRequest")
    assert.deepStrictEqual(decided.next, { balance: MAX_BALANCE, seq: 8n })
    assert.lengthOf(decided.entries, 1)
  })

  it("an entry this very call made (its message sent again after a cut) answers as its first charge, not a replay", () => {
    const made = { userId: "usr_a", scope: "credit:usr_a", amount: -250_000n, balanceAfter: 750_000n }
    const prior = new Map<string, KeyedEntry>([
      [entryKey("credit:usr_a", "resent"), { ...made, key: "resent", origin: "call-1" }],
      [entryKey("credit:usr_a", "repeated"), { ...made, key: "repeated", origin: "call-1" }],
      [entryKey("credit:usr_a", "old"), { ...made, key: "old", origin: null }]
    ])
    const decided = decide(2_000_000n, [
      charge(250_000n, "resent", { origin: "call-1" }),
      charge(250_000n, "repeated", { origin: "call-2" }),
      charge(250_000n, "old", { origin: "call-3" })
    ], prior)
    assert.deepStrictEqual(decided.decisions.map((d) => d.ok && "replay" in d.value && d.value.replay), [false, true, true])
    assert.deepStrictEqual(decided.decisions[0], { ok: true, value: { amount: 250_000n, balance: 750_000n, replay: false } })
    assert.deepStrictEqual(decided.entries, [])
  })

  it("a charge refused for the balance writes nothing and its key is named, so an earlier use of it can replay", () => {
    const decided = decide(100n, [charge(101n, "big"), { tag: "Balance" }])
    assert.strictEqual(decided.decisions[0]!.ok === false && decided.decisions[0]!.error._tag, "InsufficientCredits")
    assert.deepStrictEqual(decided.decisions[1], { ok: true, value: { balance: 100n, held: 0n } })
    assert.deepStrictEqual(decided.refused, [entry("big")])
    assert.deepStrictEqual(decided.entries, [])
    assert.deepStrictEqual(decided.next, { balance: 100n, seq: 7n })
  })

  it("a refused key that the ledger knows replays instead, whatever the balance is now", () => {
    const prior = new Map<string, KeyedEntry>([
      [entryKey("credit:usr_a", "big"), { userId: "usr_a", scope: "credit:usr_a", key: "big", amount: -900n, balanceAfter: 100n, origin: null }]
    ])
    const decided = decide(100n, [charge(900n, "big")], prior)
    assert.deepStrictEqual(decided.decisions, [{ ok: true, value: { amount: 900n, balance: 100n, replay: true } }])
    assert.deepStrictEqual(decided.refused, [])
    assert.deepStrictEqual(decided.entries, [])
  })

  it("a credit under a key used before replays with its amount, not a second credit", () => {
    const prior = new Map<string, KeyedEntry>([
      [entryKey("grant", "g"), { userId: "usr_a", scope: "grant", key: "g", amount: 5n, balanceAfter: 12n, origin: null }]
    ])
    const decided = decide(40n, [{ tag: "Credit", amount: 5n, entry: entry("g", { kind: "grant", scope: "grant" }) }], prior)
    assert.deepStrictEqual(decided.decisions, [{ ok: true, value: { amount: 5n, balance: 12n, replay: true } }])
    assert.deepStrictEqual(decided.next, { balance: 40n, seq: 7n })
  })

  it("an app whose day was not loaded is not counted on; a loaded one is, and a charge with no cap ignores the cap", () => {
    const untracked = { scope: "app_2", appId: AppId.make("app_2"), kind: "event", event: "call" }
    const tracked = { scope: "app_1", appId: AppId.make("app_1"), kind: "event", event: "call" }
    const decided = decide(
      10_000n,
      [charge(300n, "u1", untracked), charge(300n, "t1", tracked), charge(5_000n, "t2", tracked, null)],
      new Map(),
      new Map([["app_1", 100n]])
    )
    assert.deepStrictEqual(decided.decisions.map((d) => d.ok), [true, true, true])
    assert.isFalse(decided.spent.has("app_2"))
    assert.strictEqual(decided.spent.get("app_1"), 5_400n)
  })

  it("an entry carries the time of the decision and the kind, scope and key it was asked with", () => {
    const decided = decide(1_000n, [charge(10n, "t", { kind: "event", event: "call" })])
    const [written] = decided.entries
    assert.strictEqual(written!.createdAt.getTime(), NOW)
    assert.deepStrictEqual([written!.kind, written!.scope, written!.key, written!.event], ["event", "credit:usr_a", "t", "call"])
  })

  describe("holds (issue 45 item 2)", () => {
    const TTL = 60_000
    const hold = (id: string, amount: bigint): Item => ({ tag: "Hold", hold: id, amount, ttlMs: TTL })
    const release = (id: string): Item => ({ tag: "Release", hold: id })
    const withHolds = (balance: bigint, holds: ReadonlyArray<[string, bigint, number]>, items: ReadonlyArray<Item>) =>
      decideItems({
        userId: "usr_a",
        state: { balance, seq: 7n, holds: new Map(holds.map(([id, amount, expiresAt]) => [id, { amount, expiresAt }])) },
        items,
        prior: new Map(),
        spentToday: new Map(),
        now: NOW
      })

    it("a hold takes no more than is available; what it holds no charge may take (no overdraft)", () => {
      const decided = decide(1_000n, [hold("r1", 700n), hold("r2", 700n), charge(301n, "over"), charge(300n, "fits"), { tag: "Balance" }])
      assert.deepStrictEqual(decided.decisions[0], { ok: true, value: { hold: 700n, balance: 1_000n, held: 700n, expiresAt: NOW + TTL } })
      assert.deepStrictEqual(decided.decisions[1], { ok: true, value: { hold: 300n, balance: 1_000n, held: 1_000n, expiresAt: NOW + TTL } })
      assert.strictEqual(decided.decisions[2]!.ok === false && decided.decisions[2]!.error._tag, "InsufficientCredits")
      assert.strictEqual(decided.decisions[3]!.ok === false && decided.decisions[3]!.error._tag, "InsufficientCredits")
      assert.deepStrictEqual(decided.decisions[4], { ok: true, value: { balance: 1_000n, held: 1_000n } })
      assert.deepStrictEqual(decided.entries, [])
      assert.deepStrictEqual(decided.holds.map((h) => [h.hold, h.state?.amount]), [["r1", 700n], ["r2", 300n]])
    })

    it("asked again, a hold is the same hold: extended as far as is available, never shrunk, kept alive longer", () => {
      const decided = withHolds(1_000n, [["r1", 400n, NOW + 10]], [hold("r1", 200n), hold("r1", 900n), hold("r1", 5_000n)])
      assert.deepStrictEqual(decided.decisions.map((d) => d.ok && "hold" in d.value ? d.value.hold : -1n), [400n, 900n, 1_000n])
      assert.deepStrictEqual(decided.holds, [{ hold: "r1", state: { amount: 1_000n, expiresAt: NOW + TTL } }])
      assert.strictEqual(decided.next.holds?.get("r1")?.amount, 1_000n)
    })

    it("a settle voids the hold and posts its charges from what it reserved, each once by its key", () => {
      const step = (n: number, amount: bigint) => charge(amount, `run_1:${n}`, { kind: "usage", scope: "run" })
      const decided = withHolds(1_000n, [["run_1", 600n, NOW + 10], ["other", 400n, NOW + 10]], [
        release("run_1"),
        step(1, 250n),
        step(2, 250n),
        step(1, 250n),
        charge(101n, "too-much")
      ])
      assert.deepStrictEqual(decided.decisions[0], { ok: true, value: { released: 600n } })
      assert.deepStrictEqual(decided.decisions.slice(1, 4).map((d) => d.ok && "replay" in d.value && d.value.replay), [false, false, true])
      // 1,000 - 500 posted = 500, of which "other" holds 400: 100 are available.
      assert.strictEqual(decided.decisions[4]!.ok === false && decided.decisions[4]!.error._tag, "InsufficientCredits")
      assert.deepStrictEqual(decided.entries.map((e) => [e.key, e.amount, e.balanceAfter]), [["run_1:1", -250n, 750n], ["run_1:2", -250n, 500n]])
      assert.deepStrictEqual(decided.holds, [{ hold: "run_1", state: null }])
      assert.deepStrictEqual([...decided.next.holds!.keys()], ["other"])
    })

    it("an expired hold is void: its credits are available again, and it is removed with the next write", () => {
      const decided = withHolds(1_000n, [["dead", 900n, NOW], ["live", 100n, NOW + 1]], [charge(900n, "now-fits")])
      assert.isTrue(decided.decisions[0]!.ok)
      assert.deepStrictEqual(decided.holds, [{ hold: "dead", state: null }])
      assert.deepStrictEqual([...decided.next.holds!.keys()], ["live"])
    })

    it("a hold asked for again before it expires lives on (a long run renews it); once expired, it is placed anew from what is available", () => {
      // Renewed: the same amount, a new expiry, nothing taken twice.
      const renewed = withHolds(1_000n, [["long", 600n, NOW + 5]], [hold("long", 600n), { tag: "Balance" }])
      assert.deepStrictEqual(renewed.decisions[0], { ok: true, value: { hold: 600n, balance: 1_000n, held: 600n, expiresAt: NOW + TTL } })
      assert.deepStrictEqual(renewed.holds, [{ hold: "long", state: { amount: 600n, expiresAt: NOW + TTL } }])
      // Expired before it was asked again, while a charge took most of the wallet: it gets only what is left.
      const lapsed = withHolds(1_000n, [["long", 600n, NOW]], [charge(900n, "other"), hold("long", 600n)])
      assert.isTrue(lapsed.decisions[0]!.ok)
      assert.deepStrictEqual(lapsed.decisions[1], { ok: true, value: { hold: 100n, balance: 100n, held: 100n, expiresAt: NOW + TTL } })
      // Nothing available: no hold, and an expiry of now (the run asks again at its next step).
      const none = withHolds(0n, [], [hold("broke", 10n)])
      assert.deepStrictEqual(none.decisions[0], { ok: true, value: { hold: 0n, balance: 0n, held: 0n, expiresAt: NOW } })
      assert.deepStrictEqual(none.holds, [])
    })

    it("a hold voided by its run's next owner (final) fences the cut run: its later settle posts nothing new, replays what it posted, and holds nothing again", () => {
      const step = (n: number, amount: bigint): Item => ({
        tag: "Charge",
        amount,
        entry: entry(`session:s:3:${n}`, { kind: "usage", scope: "run" }),
        dailyCap: null,
        hold: "session:s:3"
      })
      // The next owner's void: the hold goes, and the hold's id is fenced for a hold's life.
      const voided = withHolds(1_000n, [["session:s:3", 600n, NOW + 10]], [{ tag: "Release", hold: "session:s:3", final: true, ttlMs: TTL }])
      assert.deepStrictEqual(voided.decisions[0], { ok: true, value: { released: 600n } })
      assert.deepStrictEqual([...voided.voided!], [["session:s:3", NOW + TTL]])
      // The cut run's settle, arriving after it: step 1 was posted before the void (it replays), step 2 is refused.
      const late = decideItems({
        userId: "usr_a",
        state: { balance: 750n, seq: 8n },
        items: [release("session:s:3"), step(1, 250n), step(2, 250n), hold("session:s:3", 500n), hold("other", 100n)],
        prior: new Map([[entryKey("run", "session:s:3:1"), { userId: "usr_a", scope: "run", key: "session:s:3:1", amount: -250n, balanceAfter: 750n, origin: null }]]),
        spentToday: new Map(),
        now: NOW + 1,
        voided: voided.voided
      })
      assert.deepStrictEqual(late.decisions[1], { ok: true, value: { amount: 250n, balance: 750n, replay: true } })
      assert.strictEqual(late.decisions[2]!.ok === false && late.decisions[2]!.error._tag, "StaleOwner")
      // Looked up by its key before it is refused: one posted before the void replays instead.
      assert.deepStrictEqual(late.refused, [{ scope: "run", key: "session:s:3:2" }].map((k) => ({ ...entry(k.key, { kind: "usage", scope: "run" }) })))
      assert.deepStrictEqual(late.decisions[3], { ok: true, value: { hold: 0n, balance: 750n, held: 0n, expiresAt: NOW + 1 } })
      assert.deepStrictEqual(late.decisions[4], { ok: true, value: { hold: 100n, balance: 750n, held: 100n, expiresAt: NOW + 1 + TTL } })
      assert.deepStrictEqual(late.entries, [])
      // A plain settle (the run's own) fences nothing; and a fence lapses with a hold's life.
      assert.isUndefined(withHolds(1_000n, [["r", 10n, NOW + 10]], [release("r")]).voided)
      const after = decideItems({ userId: "usr_a", state: { balance: 750n, seq: 8n }, items: [step(2, 250n)], prior: new Map(), spentToday: new Map(), now: NOW + TTL, voided: voided.voided })
      assert.isTrue(after.decisions[0]!.ok)
    })
  })
})
