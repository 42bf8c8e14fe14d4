import { Cause, Context, FiberRef, FiberRefs, HashMap, Layer, Logger, LogLevel, Tracer } from "effect"

/**
 * The process's log: JSON lines for machines (one object per line on stdout, flat, with the time, the level, the
 * message, every log annotation and, when tracing is on, the trace and span ids), pretty text for a person at a
 * terminal. `LOG_FORMAT` picks one (`json`, `pretty`; by default JSON unless stdout is a TTY), `LOG_LEVEL` the floor.
 */

export type LogFormat = "json" | "pretty"

/** What a value logged next to the message becomes in a JSON line: an error keeps its name, message and stack. */
const serialisable = (value: unknown): unknown => {
  if (value instanceof Error) return { name: value.name, message: value.message, stack: value.stack }
  if (typeof value === "bigint") return value.toString()
  return value
}

const safeStringify = (line: Record<string, unknown>): string => {
  try {
    return JSON.stringify(line, (_key, value) => typeof value === "bigint" ? value.toString() : value)
  } catch {
    return JSON.stringify({ time: line.time, level: line.level, msg: String(line.msg), unserialisable: true })
  }
}

/** Fields of a line that an annotation may not overwrite. */
const RESERVED = new Set(["time", "level", "msg", "trace_id", "span_id", "cause", "details"])

export const jsonLogger = (options: { readonly traceIds: boolean; readonly write?: (line: string) => void }) => {
  const write = options.write ?? ((line: string) => void process.stdout.write(line + "\n"))
  return Logger.make(({ annotations, cause, context, date, logLevel, message }) => {
    const parts = Array.isArray(message) ? message : [message]
    const line: Record<string, unknown> = {
      time: date.toISOString(),
      level: logLevel.label.toLowerCase(),
      msg: parts.filter((part) => typeof part === "string").join(" ")
    }
    const details = parts.filter((part) => typeof part !== "string").map(serialisable)
    if (details.length > 0) line.details = details
    for (const [key, value] of HashMap.toEntries(annotations)) {
      if (!RESERVED.has(key)) line[key] = serialisable(value)
    }
    if (options.traceIds) {
      const span = Context.getOption(FiberRefs.getOrDefault(context, FiberRef.currentContext), Tracer.ParentSpan)
      if (span._tag === "Some" && span.value._tag === "Span" && span.value.sampled) {
        line.trace_id = span.value.traceId
        line.span_id = span.value.spanId
      }
    }
    if (!Cause.isEmpty(cause)) line.cause = Cause.pretty(cause, { renderErrorCause: true })
    write(safeStringify(line))
  })
}

/** JSON unless a person is watching: the default the issue asks for, overridable with `LOG_FORMAT`. */
export const defaultFormat = (): LogFormat => process.stdout.isTTY ? "pretty" : "json"

export const layer = (options: {
  readonly format: LogFormat
  readonly level: LogLevel.LogLevel
  readonly traceIds: boolean
}): Layer.Layer<never> =>
  Layer.merge(
    // main.ts runs with `disablePrettyLogger`, so the default logger is the one to replace in both formats.
    Logger.replace(
      Logger.defaultLogger,
      options.format === "json" ? jsonLogger({ traceIds: options.traceIds }) : Logger.prettyLoggerDefault
    ),
    Logger.minimumLogLevel(options.level)
  )
