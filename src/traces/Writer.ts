import { Duration, Effect, Layer, Metric, Schedule } from "effect"
import { type SpanRecord, TraceSink } from "../runtime/Tracing.js"
import { AgentsRepo } from "../agents/Repo.js"
import { SecretBox } from "../credentials/SecretBox.js"
import { ToolsConfig } from "../runtime/tools/Config.js"
import { makeExporter } from "./Export.js"
import { TracesRepo } from "./Repo.js"

/**
 * The span processor (docs/traces.md): a run hands each ended span to `offer`, which only appends it to a buffer;
 * a fiber of its own writes the buffer every `FLUSH_EVERY` (one statement per batch, whatever the number of runs),
 * so a trace is readable well within 2 s of its run's end and a run never waits for its trace.
 */

/** How often the buffer is written: the bound on how late a trace becomes visible, less the write itself. */
export const FLUSH_EVERY = Duration.millis(500)
/** At most this many spans per statement; more wait for the next round (they are written back to back). */
export const BATCH_SIZE = 2_000
/** Spans held while the database cannot take them; past this the oldest are dropped (and counted), not the run. */
export const MAX_BUFFERED = 100_000

const written = Metric.counter("atrium_trace_spans_written_total", { description: "Spans written to trace storage" })
const dropped = Metric.counter("atrium_trace_spans_dropped_total", {
  description: "Spans dropped because trace storage could not keep up (the database refused them for too long)"
})

export const TraceWriterLive = Layer.scoped(
  TraceSink,
  Effect.gen(function*() {
    const repo = yield* TracesRepo
    const exporter = yield* makeExporter
    yield* Effect.forkScoped(exporter.worker)
    let buffer: Array<SpanRecord> = []
    let lost = 0

    const offer = (span: SpanRecord) => {
      if (buffer.length >= MAX_BUFFERED) {
        buffer.shift()
        lost++
      }
      buffer.push(span)
    }

    /** Writes everything buffered, a batch at a time; a refused batch goes back in front for the next round. */
    const flush = Effect.gen(function*() {
      if (lost > 0) {
        const count = lost
        lost = 0
        yield* Metric.incrementBy(dropped, count)
        yield* Effect.logWarning(`traces: ${count} span(s) dropped, trace storage could not keep up`)
      }
      while (buffer.length > 0) {
        const batch = buffer.slice(0, BATCH_SIZE)
        buffer = buffer.slice(batch.length)
        const result = yield* Effect.either(repo.write(batch))
        if (result._tag === "Left") {
          if (!repo.refusedForGood(result.left)) {
            // Back in front (a later span's root must not be written before its children), capped as `offer` is.
            buffer = [...batch, ...buffer].slice(-MAX_BUFFERED)
            yield* Effect.logWarning("traces: a batch of spans could not be written; trying again", result.left)
            return
          }
          // Its data was refused, so it would be refused again, and every trace after it would wait behind it: each
          // span is written alone, in order; one refused for good even so is dropped and counted. If the database
          // cannot take one now (it went away meanwhile), that span and the rest go back in front, in order, so a
          // root is never written before children of its batch (its summary counts the spans stored before it).
          yield* Effect.logError("traces: a batch of spans was refused; writing them one by one", result.left)
          const kept: Array<SpanRecord> = []
          let later: Array<SpanRecord> = []
          let refused = 0
          for (const [i, span] of batch.entries()) {
            const alone = yield* Effect.either(repo.write([span]))
            if (alone._tag === "Right") kept.push(span)
            else if (repo.refusedForGood(alone.left)) refused++
            else {
              later = batch.slice(i)
              break
            }
          }
          if (refused > 0) {
            yield* Metric.incrementBy(dropped, refused)
            yield* Effect.logError(`traces: ${refused} span(s) refused by trace storage, dropped`)
          }
          buffer = [...later, ...buffer].slice(-MAX_BUFFERED)
          yield* Metric.incrementBy(written, kept.length)
          exporter.offer(kept)
          if (later.length > 0) return
          continue
        }
        yield* Metric.incrementBy(written, batch.length)
        exporter.offer(batch)
      }
    })

    yield* flush.pipe(
      Effect.catchAllCause((cause) => Effect.logError("traces: the writer failed a round", cause)),
      Effect.repeat(Schedule.spaced(FLUSH_EVERY)),
      Effect.forkScoped
    )
    // What the last round left is written as the process stops (SIGTERM), not lost.
    yield* Effect.addFinalizer(() => flush.pipe(Effect.catchAllCause(() => Effect.void)))
    return TraceSink.of({ offer })
  })
).pipe(Layer.provide([TracesRepo.Default, AgentsRepo.Default, SecretBox.Default, ToolsConfig.Default]))
