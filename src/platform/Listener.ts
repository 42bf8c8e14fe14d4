import { Cause, Effect, Option, Redacted, Schedule, Stream } from "effect"
import pg from "pg"
import { AppConfig } from "./Config.js"
import { DatabaseSessions } from "./Database.js"

/**
 * PostgreSQL `LISTEN` that survives the database: a restart, a stop, a connection cut by `pg_terminate_backend`.
 *
 * `@effect/sql-pg`'s `listen` keeps one client for good and swallows its errors: after a restart its stream stays
 * open and silent forever (issue 26: subscribers on other runners got 0 of the events that followed). Here a runner's
 * channels share **one** connection, watched three ways: its `error` and `end` events, and a probe (`SELECT 1` every
 * `PROBE_EVERY_MS`, answered within `PROBE_TIMEOUT_MS`) for a connection the kernel still keeps open while nobody
 * answers on it. A lost connection is opened again with backoff (0.1 s doubling to 2 s) and `LISTEN`s again.
 *
 * One connection, not one per channel: PostgreSQL wakes every backend that listens in the database on every `NOTIFY`,
 * whatever its channel, and each woken backend reads the queue in a transaction of its own. With a connection per
 * channel (two per runner), each of a session turn's notifying log writes cost every runner two transactions more:
 * about 8 of the 17 commits one session's turn cost (issue 45; BENCHMARKS.md).
 *
 * A subscription says `Listening` after every (re)`LISTEN` of its channel: notifications sent while no connection
 * listened are lost, so the reader catches up from the durable state (a session's log by `seq`, an approval's row)
 * at that point.
 */
export type ListenSignal =
  | { readonly _tag: "Listening"; readonly again: boolean }
  | { readonly _tag: "Note"; readonly payload: string }

const PROBE_EVERY_MS = 2_000
const PROBE_TIMEOUT_MS = 3_000

/** Backoff of reconnections: 0.1 s, doubling, at most 2 s apart, forever. */
export const reconnectSchedule = Schedule.exponential("100 millis", 2).pipe(Schedule.union(Schedule.spaced("2 seconds")))

/** One reader of one channel. */
interface Subscriber {
  readonly channel: string
  readonly ignore: (payload: string) => boolean
  readonly signal: (signal: ListenSignal) => void
  /** Told `Listening` once already: the next is a reconnection's (`again`). */
  listened: boolean
}

/** What the shared connection asks of the subscriptions, and tells them. */
interface Hooks {
  readonly channels: () => ReadonlySet<string>
  /** The connection listens on `channels` (every one asked for when it connected). */
  readonly connected: (client: pg.Client, channels: ReadonlySet<string>) => void
  readonly disconnected: () => void
  readonly note: (channel: string, payload: string) => void
}

const connection = (url: string, applicationName: string, hooks: Hooks) =>
  // Callbacks only, no element: the subscriptions are told directly (a notification offered through a fiber each cost
  // a session turn's events nine fibers per turn, issue 28).
  Stream.asyncPush<never, Error>((emit) =>
    Effect.gen(function*() {
      const client = new pg.Client({ connectionString: url, keepAlive: true, application_name: applicationName })
      yield* Effect.addFinalizer(() =>
        Effect.sync(hooks.disconnected).pipe(
          Effect.zipRight(Effect.promise(() => client.end().catch(() => undefined)).pipe(Effect.timeoutOption("1 second"))),
          Effect.ignore
        )
      )
      const lost = (cause: unknown) => emit.fail(cause instanceof Error ? cause : new Error(String(cause)))
      client.on("error", lost)
      client.on("end", () => lost(new Error("the listening connection ended")))
      client.on("notification", (message) => {
        if (message.payload !== undefined) hooks.note(message.channel, message.payload)
      })
      yield* Effect.tryPromise(() => client.connect())
      const channels = new Set(hooks.channels())
      for (const channel of channels) yield* Effect.tryPromise(() => client.query(`LISTEN ${client.escapeIdentifier(channel)}`))
      hooks.connected(client, channels)
      // The probe runs on plain callbacks, not a fiber: a fiber looping over `delay`, `timeoutFail` (a race, so a fork
      // per probe) and the query cost an idle runner more than any of its other timers (issue 28 item 3). A probe is
      // sent every `PROBE_EVERY_MS` unless the last one is still out, and the connection is lost if one goes unanswered
      // for `PROBE_TIMEOUT_MS`, as before.
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          let out: ReturnType<typeof setTimeout> | undefined
          const answered = () => {
            clearTimeout(out)
            out = undefined
          }
          const probe = setInterval(() => {
            if (out !== undefined) return
            out = setTimeout(() => lost(new Error("no answer on the listening connection")), PROBE_TIMEOUT_MS)
            client.query("SELECT 1").then(answered, lost)
          }, PROBE_EVERY_MS)
          return () => {
            clearInterval(probe)
            clearTimeout(out)
          }
        }),
        (stop) => Effect.sync(stop)
      )
    }).pipe(Effect.mapError((error) => (error instanceof Error ? error : new Error(String(error))))),
    { bufferSize: "unbounded" }
  )

/**
 * The runner's `LISTEN`s on the deployment's database (cluster mode), over one connection opened at the first
 * subscription and kept, re-opened and re-`LISTEN`ed on every channel asked for, until the runner stops.
 */
export class Notifications extends Effect.Service<Notifications>()("atrium/platform/Notifications", {
  scoped: Effect.gen(function*() {
    const config = yield* AppConfig
    const { applicationName } = yield* DatabaseSessions
    const scope = yield* Effect.scope
    const subscribers = new Set<Subscriber>()
    /** The connection while it listens, and the channels it has `LISTEN`ed on. */
    let live: { readonly client: pg.Client; readonly channels: Set<string> } | undefined
    let started = false

    const tell = (subscriber: Subscriber) => {
      subscriber.signal({ _tag: "Listening", again: subscriber.listened })
      subscriber.listened = true
    }
    const hooks: Hooks = {
      channels: () => new Set(Array.from(subscribers, (subscriber) => subscriber.channel)),
      connected: (client, channels) => {
        live = { client, channels: new Set(channels) }
        // A subscriber that came after the channels were read (its channel may be new) listens now.
        for (const subscriber of subscribers) {
          if (channels.has(subscriber.channel)) tell(subscriber)
          else join(subscriber)
        }
      },
      disconnected: () => {
        live = undefined
      },
      note: (channel, payload) => {
        for (const subscriber of subscribers) {
          if (subscriber.channel === channel && !subscriber.ignore(payload)) subscriber.signal({ _tag: "Note", payload })
        }
      }
    }

    /** Listens on the connection as it is now: told at once if it already listens on the channel, else after its `LISTEN`. */
    const join = (subscriber: Subscriber) => {
      const now = live
      if (now === undefined) return // the next connection listens on every subscriber's channel, and tells them
      if (now.channels.has(subscriber.channel)) return tell(subscriber)
      now.client.query(`LISTEN ${now.client.escapeIdentifier(subscriber.channel)}`).then(() => {
        // A connection lost meanwhile is opened again with every channel: its `connected` tells the subscriber.
        if (live !== now) return
        now.channels.add(subscriber.channel)
        for (const waiting of subscribers) if (waiting.channel === subscriber.channel && !waiting.listened) tell(waiting)
      }, () => undefined)
    }

    const keepListening = Effect.suspend(() => {
      if (started) return Effect.void
      started = true
      const url = Option.getOrThrow(Option.map(config.databaseUrl, Redacted.value))
      return connection(url, applicationName, hooks).pipe(
        Stream.tapErrorCause((cause) => Effect.logWarning("lost the listening connection; listening again", Cause.squash(cause))),
        Stream.retry(reconnectSchedule),
        Stream.runDrain,
        // Forked from a subscription's start, which may run uninterruptibly: the connection's fiber must stay
        // interruptible, or the runner's stop would wait on it forever.
        Effect.interruptible,
        Effect.forkIn(scope),
        Effect.asVoid
      )
    })

    /**
     * `LISTEN channel` for as long as the stream is read; never fails. Notifications whose payload `ignore` accepts
     * never enter the stream (a runner's own, which it has already told its subscribers).
     */
    const listen = (channel: string, ignore: (payload: string) => boolean = () => false): Stream.Stream<ListenSignal> =>
      Stream.asyncPush<ListenSignal>((emit) =>
        Effect.zipRight(
          keepListening,
          Effect.acquireRelease(
            Effect.sync(() => {
              const subscriber: Subscriber = { channel, ignore, signal: (signal) => void emit.single(signal), listened: false }
              subscribers.add(subscriber)
              join(subscriber)
              return subscriber
            }),
            (subscriber) => Effect.sync(() => void subscribers.delete(subscriber))
          )
        ), { bufferSize: "unbounded" })

    return { listen }
  }),
  dependencies: [AppConfig.Default]
}) {}
