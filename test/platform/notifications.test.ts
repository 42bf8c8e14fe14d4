import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Stream } from "effect"
import pg from "pg"
import { DatabaseSessions } from "../../src/platform/Database.js"
import { type ListenSignal, Notifications } from "../../src/platform/Listener.js"
import { pollUntil } from "../support/Poll.js"
import { makeMigratedStorage } from "../support/Templates.js"

/**
 * A runner's `LISTEN`s (`src/platform/Listener.ts`) on PostgreSQL: every channel on one connection (PostgreSQL wakes
 * each listening backend of the database on every `NOTIFY`, and each wake is a transaction: issue 45), each
 * subscriber told only its channel's notes and not those it ignores, and, after the connection is cut, every
 * subscriber told `Listening` again and its notes arriving again.
 */

/** The test database's URL, for a connection of the test's own. */
class Url extends Effect.Tag("test/notifications/Url")<Url, string>() {}

const storage = Layer.unwrapScoped(Effect.map(makeMigratedStorage, (storage) =>
  Layer.mergeAll(
    Layer.succeed(Url, storage.env.DATABASE_URL!),
    Notifications.Default.pipe(Layer.provideMerge(DatabaseSessions.Default))
  ).pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(storage.env))))))))

/** What a subscription was told, in order. */
const subscribe = (channel: string, ignore?: (payload: string) => boolean) =>
  Effect.gen(function*() {
    const told: Array<ListenSignal> = []
    yield* (yield* Notifications).listen(channel, ignore).pipe(
      Stream.runForEach((signal) => Effect.sync(() => void told.push(signal))),
      Effect.forkScoped
    )
    return told
  })

const notes = (told: ReadonlyArray<ListenSignal>) => told.flatMap((signal) => signal._tag === "Note" ? [signal.payload] : [])
const listenings = (told: ReadonlyArray<ListenSignal>) => told.flatMap((signal) => signal._tag === "Listening" ? [signal.again] : [])

describe("notifications (PostgreSQL LISTEN)", () => {
  it.scopedLive("one connection for every channel; each subscriber gets its own channel's notes, again after the connection is cut", () =>
    Effect.gen(function*() {
      const url = yield* Url
      const { applicationName } = yield* DatabaseSessions
      const admin = new pg.Client({ connectionString: url })
      yield* Effect.acquireRelease(Effect.promise(() => admin.connect()), () => Effect.promise(() => admin.end()))
      const query = (text: string, values: Array<unknown> = []) => Effect.promise(() => admin.query(text, values).then((r) => r.rows))
      const connections = query("SELECT pid FROM pg_stat_activity WHERE application_name = $1", [applicationName])

      const sessions = yield* subscribe("atrium_test_sessions", (payload) => payload.startsWith("own:"))
      const approvals = yield* subscribe("atrium_test_approvals")
      yield* pollUntil(Effect.sync(() => [listenings(sessions), listenings(approvals)]), (told) => told.every((l) => l.length >= 1), "both subscriptions listening")
      assert.deepStrictEqual([listenings(sessions), listenings(approvals)], [[false], [false]])
      // A third subscriber on a channel already listened to is told at once, on the same connection.
      const late = yield* subscribe("atrium_test_approvals")
      yield* pollUntil(Effect.sync(() => listenings(late)), (l) => l.length >= 1, "the late subscription listening")

      // The guard: two channels and three subscriptions, one database session (two before: one per channel).
      assert.strictEqual((yield* connections).length, 1, "one listening connection for the runner")

      yield* query("SELECT pg_notify('atrium_test_sessions', 'own:skipped'), pg_notify('atrium_test_sessions', 's1'), pg_notify('atrium_test_approvals', 'a1')")
      yield* pollUntil(Effect.sync(() => [notes(sessions), notes(approvals), notes(late)]), ([s, a, l]) => s!.length > 0 && a!.length > 0 && l!.length > 0, "the first notes")
      assert.deepStrictEqual([notes(sessions), notes(approvals), notes(late)], [["s1"], ["a1"], ["a1"]])

      // Cut (as a peer runner's watch or an operator would): every subscriber is told it listens again, and notes come.
      const [before] = yield* connections
      yield* query("SELECT pg_terminate_backend($1)", [before!.pid])
      yield* pollUntil(
        Effect.sync(() => [listenings(sessions), listenings(approvals), listenings(late)]),
        (told) => told.every((l) => l.length === 2),
        "every subscription listening again",
        { within: 15_000 }
      )
      assert.deepStrictEqual([listenings(sessions), listenings(approvals), listenings(late)], [[false, true], [false, true], [false, true]])
      const after = yield* connections
      assert.strictEqual(after.length, 1)
      assert.notStrictEqual(after[0]!.pid, before!.pid, "a new connection")
      yield* query("SELECT pg_notify('atrium_test_sessions', 's2'), pg_notify('atrium_test_approvals', 'a2')")
      yield* pollUntil(Effect.sync(() => [notes(sessions), notes(late)]), ([s, l]) => s!.length === 2 && l!.length === 2, "the notes after the cut")
      assert.deepStrictEqual([notes(sessions), notes(approvals), notes(late)], [["s1", "s2"], ["a1", "a2"], ["a1", "a2"]])
    }).pipe(Effect.provide(storage)), { timeout: 30_000 })
})
