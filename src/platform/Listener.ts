import { Cause, Effect, Option, Redacted, Schedule, Stream } from "effect"
import pg from "pg"
import { AppConfig } from "./Config.js"
import { DatabaseSessions } from "./Database.js"

/**
 * PostgreSQL `LISTEN` that survives the database: a restart, a stop, a connection cut by `pg_terminate_backend`.
 *
 * `@effect/sql-pg`'s `listen` keeps one client for good and swallows its errors: after a restart its stream stays
 * open and silent forever (issue 26: subscribers on other runners got 0 of the events that followed). Here each
 * channel has a connection of its own, watched three ways: its `error` and `end` events, and a probe (`SELECT 1`
 * every `PROBE_EVERY_MS`, answered within `PROBE_TIMEOUT_MS`) for a connection the kernel still keeps open while nobody
 * answers on it. A lost connection is opened again with backoff (0.1 s doubling to 2 s) and `LISTEN`s again.
 *
 * The stream says `Listening` after every (re)`LISTEN`: notifications sent while no connection listened are lost, so
 * the reader catches up from the durable state (a session's log by `seq`, an approval's row) at that point.
 */
export type ListenSignal =
  | { readonly _tag: "Listening"; readonly again: boolean }
  | { readonly _tag: "Note"; readonly payload: string }

const PROBE_EVERY_MS = 2_000
const PROBE_TIMEOUT_MS = 3_000

/** Backoff of reconnections: 0.1 s, doubling, at most 2 s apart, forever. */
export const reconnectSchedule = Schedule.exponential("100 millis", 2).pipe(Schedule.union(Schedule.spaced("2 seconds")))

const connection = (url: string, applicationName: string, channel: string, again: () => boolean, ignore: (payload: string) => boolean) =>
  // Pushed, not offered: `asyncScoped`'s emit runs a fiber per notification to offer it (a session turn's events came
  // back to their own runner as nine fibers per turn, issue 28); the push buffer is unbounded, as that was.
  Stream.asyncPush<ListenSignal, Error>((emit) =>
    Effect.gen(function*() {
      const client = new pg.Client({ connectionString: url, keepAlive: true, application_name: applicationName })
      yield* Effect.addFinalizer(() =>
        Effect.promise(() => client.end().catch(() => undefined)).pipe(Effect.timeoutOption("1 second"), Effect.ignore)
      )
      const lost = (cause: unknown) => emit.fail(cause instanceof Error ? cause : new Error(String(cause)))
      client.on("error", lost)
      client.on("end", () => lost(new Error(`the connection listening on ${channel} ended`)))
      client.on("notification", (message) => {
        if (message.channel === channel && message.payload !== undefined && !ignore(message.payload)) {
          emit.single({ _tag: "Note", payload: message.payload })
        }
      })
      yield* Effect.tryPromise(() => client.connect())
      yield* Effect.tryPromise(() => client.query(`LISTEN ${client.escapeIdentifier(channel)}`))
      emit.single({ _tag: "Listening", again: again() })
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
            out = setTimeout(() => lost(new Error(`no answer on the connection listening on ${channel}`)), PROBE_TIMEOUT_MS)
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
 * `LISTEN channel` on the deployment's database for as long as the stream is read; never fails. Notifications whose
 * payload `ignore` accepts never enter the stream (a runner's own, which it has already told its subscribers).
 */
export const listenResilient = (
  channel: string,
  ignore: (payload: string) => boolean = () => false
): Effect.Effect<Stream.Stream<ListenSignal>, never, AppConfig | DatabaseSessions> =>
  Effect.map(Effect.zip(AppConfig, DatabaseSessions), ([config, { applicationName }]) => {
    const url = Option.getOrThrow(Option.map(config.databaseUrl, Redacted.value))
    let listened = false
    return connection(url, applicationName, channel, () => {
      const before = listened
      listened = true
      return before
    }, ignore).pipe(
      Stream.tapErrorCause((cause) => Effect.logWarning(`lost the connection listening on ${channel}; listening again`, Cause.squash(cause))),
      Stream.retry(reconnectSchedule),
      Stream.orDie
    )
  })
