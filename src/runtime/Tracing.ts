import {
  ATTR_GEN_AI_AGENT_ID,
  ATTR_GEN_AI_AGENT_NAME,
  ATTR_GEN_AI_AGENT_VERSION,
  ATTR_GEN_AI_CONVERSATION_ID,
  ATTR_GEN_AI_INPUT_MESSAGES,
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_OUTPUT_MESSAGES,
  ATTR_GEN_AI_PROVIDER_NAME,
  ATTR_GEN_AI_REQUEST_MODEL,
  ATTR_GEN_AI_RESPONSE_FINISH_REASONS,
  ATTR_GEN_AI_RESPONSE_MODEL,
  ATTR_GEN_AI_TOOL_CALL_ARGUMENTS,
  ATTR_GEN_AI_TOOL_CALL_ID,
  ATTR_GEN_AI_TOOL_CALL_RESULT,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_GEN_AI_TOOL_TYPE,
  ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
  GEN_AI_OPERATION_NAME_VALUE_CHAT,
  GEN_AI_OPERATION_NAME_VALUE_EXECUTE_TOOL,
  GEN_AI_OPERATION_NAME_VALUE_INVOKE_AGENT,
  GEN_AI_OPERATION_NAME_VALUE_RETRIEVAL
} from "@opentelemetry/semantic-conventions/incubating"
import { ATTR_ERROR_TYPE } from "@opentelemetry/semantic-conventions"
import { Clock, Context, Effect, Exit, FiberRef, Option, type Tracer } from "effect"
import * as Tracers from "effect/Tracer"
import { createHash } from "node:crypto"
import { randomHex } from "../platform/Ids.js"
import { storableText } from "../platform/Storable.js"
import type { RunId } from "./Domain.js"
import type { Micros } from "../platform/Money.js"

/**
 * Every run is a trace (issue 46, docs/traces.md): a tree of spans named by the OpenTelemetry GenAI conventions
 * (`invoke_agent {expert}`, `chat {model}`, `execute_tool {tool}`, `retrieval`, and the approval waits), built with
 * Effect's own tracer (`Effect.withSpan`) and handed, as each span ends, to a `TraceSink` that the traces domain
 * implements above the engine (it writes them to PostgreSQL in batches, off the run's path).
 */

export const Attr = {
  operation: ATTR_GEN_AI_OPERATION_NAME,
  provider: ATTR_GEN_AI_PROVIDER_NAME,
  requestModel: ATTR_GEN_AI_REQUEST_MODEL,
  responseModel: ATTR_GEN_AI_RESPONSE_MODEL,
  inputTokens: ATTR_GEN_AI_USAGE_INPUT_TOKENS,
  outputTokens: ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
  cachedTokens: ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
  finishReasons: ATTR_GEN_AI_RESPONSE_FINISH_REASONS,
  errorType: ATTR_ERROR_TYPE,
  agentName: ATTR_GEN_AI_AGENT_NAME,
  agentId: ATTR_GEN_AI_AGENT_ID,
  agentVersion: ATTR_GEN_AI_AGENT_VERSION,
  conversationId: ATTR_GEN_AI_CONVERSATION_ID,
  toolName: ATTR_GEN_AI_TOOL_NAME,
  toolType: ATTR_GEN_AI_TOOL_TYPE,
  toolCallId: ATTR_GEN_AI_TOOL_CALL_ID,
  toolArguments: ATTR_GEN_AI_TOOL_CALL_ARGUMENTS,
  toolResult: ATTR_GEN_AI_TOOL_CALL_RESULT,
  inputMessages: ATTR_GEN_AI_INPUT_MESSAGES,
  outputMessages: ATTR_GEN_AI_OUTPUT_MESSAGES,
  /** What the span was charged, in micro-credits (a bigint): taken out of the attributes into the span's `credits`. */
  credits: "atrium.credits_micros",
  /** How an approval wait ended: `approved`, `denied` (by the user, or by its expiry). */
  approvalDecision: "atrium.approval.decision",
  approvalId: "atrium.approval.id"
} as const

export const Operation = {
  invokeAgent: GEN_AI_OPERATION_NAME_VALUE_INVOKE_AGENT,
  chat: GEN_AI_OPERATION_NAME_VALUE_CHAT,
  executeTool: GEN_AI_OPERATION_NAME_VALUE_EXECUTE_TOOL,
  retrieval: GEN_AI_OPERATION_NAME_VALUE_RETRIEVAL,
  /** Not in the conventions: a wait for a human's answer to an `ask` tool call. */
  approval: "await_approval"
} as const

/** Content attributes (messages, tool arguments and results) are kept to this many characters each. */
export const MAX_CONTENT_CHARS = 16_384

export const contentOf = (value: unknown): string => {
  const text = typeof value === "string" ? value : JSON.stringify(value) ?? ""
  // A cut between the halves of a pair would leave a lone surrogate, which the stored span cannot hold.
  return text.length > MAX_CONTENT_CHARS ? `${storableText(text.slice(0, MAX_CONTENT_CHARS))}…` : text
}

/** Whose run a trace is: written with every span, so the traces domain can say who may read it. */
export interface TraceRun {
  readonly runId: RunId
  readonly agentId: string | null
  readonly agent: string
  readonly agentVersion: number | null
  readonly ownerId: string
  readonly payerId: string
  readonly endUserId: string
  readonly sessionId: string | null
  /** The expert's creator turned content capture on (`trace_content`): messages and tool data are kept. */
  readonly captureContent: boolean
}

/** A span as it ended. */
export interface SpanRecord {
  readonly traceId: string
  readonly spanId: string
  /** The nearest traced ancestor; null for the trace's root. */
  readonly parentSpanId: string | null
  readonly run: TraceRun
  readonly name: string
  readonly kind: Tracer.SpanKind
  /** Nanoseconds since the epoch (Effect's clock). */
  readonly startTime: bigint
  readonly endTime: bigint
  readonly status: "ok" | "error"
  readonly attributes: Readonly<Record<string, unknown>>
  readonly credits: Micros
}

/**
 * Where ended spans go (implemented by `src/traces`). `offer` must not block or fail: the run never waits for its
 * trace; a sink that cannot keep up drops spans and says so in its own log and metrics.
 */
export class TraceSink extends Context.Tag("atrium/runtime/TraceSink")<TraceSink, {
  readonly offer: (span: SpanRecord) => void
}>() {}

const newSpanId = () => randomHex(8)

/** The root trace of a run is named after its run id, so a durable run executed again keeps its trace. */
export const traceIdOf = (runId: RunId) => createHash("sha256").update(runId).digest("hex").slice(0, 32)

type Parent = Option.Option<Tracer.AnySpan>

/**
 * A span of a run: recorded (one of the GenAI spans, marked by `gen_ai.operation.name`) or only passed through
 * (every `Effect.fn` span inside the run), which keeps its nearest recorded ancestor so a credit annotated on it
 * reaches the span that pays. When the operator exports spans (OTLP), each also has its twin in that tracer.
 */
class RunSpan implements Tracer.Span {
  readonly _tag = "Span"
  readonly spanId: string
  readonly traceId: string
  readonly attributes = new Map<string, unknown>()
  readonly links: Array<Tracer.SpanLink>
  readonly sampled = true
  status: Tracer.SpanStatus
  credits = 0n

  constructor(
    readonly name: string,
    readonly parent: Parent,
    readonly context: Context.Context<never>,
    links: ReadonlyArray<Tracer.SpanLink>,
    startTime: bigint,
    readonly kind: Tracer.SpanKind,
    readonly recorded: boolean,
    /** The nearest recorded span above (this one's parent in the stored tree). */
    readonly recordedParent: RunSpan | undefined,
    readonly run: TraceRun,
    readonly sink: TraceSink["Type"],
    readonly twin: Tracer.Span | undefined,
    traceId: string
  ) {
    this.links = [...links]
    this.status = { _tag: "Started", startTime }
    this.spanId = twin?.spanId ?? newSpanId()
    this.traceId = traceId
  }

  /** Where a credit said inside this span is counted: this span if it is recorded, else its recorded ancestor. */
  get payee(): RunSpan | undefined {
    return this.recorded ? this : this.recordedParent
  }

  attribute(key: string, value: unknown) {
    if (key === Attr.credits) {
      const payee = this.payee
      if (payee !== undefined && typeof value === "bigint") payee.credits += value
      return
    }
    this.attributes.set(key, value)
    this.twin?.attribute(key, value)
  }

  event(name: string, startTime: bigint, attributes?: Record<string, unknown>) {
    this.twin?.event(name, startTime, attributes)
  }

  addLinks(links: ReadonlyArray<Tracer.SpanLink>) {
    this.links.push(...links)
    this.twin?.addLinks(links)
  }

  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>) {
    const startTime = this.status.startTime
    this.status = { _tag: "Ended", startTime, endTime, exit }
    this.twin?.end(endTime, exit)
    if (!this.recorded) return
    const failed = Exit.isFailure(exit) && !Exit.isInterrupted(exit)
    if (failed && !this.attributes.has(Attr.errorType)) this.attributes.set(Attr.errorType, errorTypeOf(exit))
    if (Exit.isInterrupted(exit) && !this.attributes.has(Attr.errorType)) this.attributes.set(Attr.errorType, "interrupted")
    const attributes: Record<string, unknown> = {}
    for (const [key, value] of this.attributes) {
      if (key === "code.stacktrace" || (!this.run.captureContent && CONTENT_KEYS.has(key))) continue
      attributes[key] = typeof value === "bigint" ? value.toString() : value
    }
    this.sink.offer({
      traceId: this.traceId,
      spanId: this.spanId,
      parentSpanId: this.recordedParent?.spanId ?? null,
      run: this.run,
      name: this.name,
      kind: this.kind,
      startTime,
      endTime,
      status: this.attributes.has(Attr.errorType) ? "error" : "ok",
      attributes,
      credits: this.credits
    })
  }
}

const CONTENT_KEYS = new Set<string>([Attr.inputMessages, Attr.outputMessages, Attr.toolArguments, Attr.toolResult])

/** The failure's tag (`ModelUnavailable`, `BudgetExhausted`...), as `error.type` wants a low-cardinality class. */
const errorTypeOf = (exit: Exit.Exit<unknown, unknown>): string => {
  if (Exit.isSuccess(exit)) return "_OTHER"
  const failure = exit.cause._tag === "Fail" ? exit.cause.error : undefined
  const tag = (failure as { _tag?: unknown } | undefined)?._tag
  return typeof tag === "string" ? tag : "_OTHER"
}

/**
 * A tracer for one run: its GenAI spans are recorded for `run`, every span is passed on to the tracer the run found
 * (`outer`) when that one was on. Child runs (delegation) make their own, and find their parent in the context.
 */
export const runTracer = (
  sink: TraceSink["Type"],
  run: TraceRun,
  outer: Tracer.Tracer,
  outerEnabled: boolean
): Tracer.Tracer =>
  Tracers.make({
    span(name, parent, context, links, startTime, kind, options) {
      const above = Option.getOrUndefined(parent)
      const mine = above instanceof RunSpan ? above : undefined
      const recorded = options?.attributes?.[Attr.operation] !== undefined
      const recordedParent = mine?.payee
      const outerParent = mine !== undefined ? Option.fromNullable<Tracer.AnySpan | undefined>(mine.twin) as Parent : parent
      const twin = outerEnabled ? outer.span(name, outerParent, context, links, startTime, kind, options) : undefined
      // A recorded span continues its recorded ancestor's trace; a run's root names its trace after the run.
      const traceId = recordedParent?.traceId ?? (recorded ? traceIdOf(run.runId) : mine?.traceId ?? traceIdOf(run.runId))
      return new RunSpan(name, parent, context, links, startTime, kind, recorded, recordedParent, run, sink, twin, traceId)
    },
    context: (f, fiber) => outer.context(f, fiber)
  })

/**
 * What a traced run's fibers know of its trace: its tracer, whether content is kept, whether the operator's tracing
 * is on, and the innermost GenAI span (where `annotateSpan` and `chargedToSpan` write, and the parent of the next
 * GenAI span, whatever `Effect.fn` spans lie between). One reference, so a span costs one `locally`.
 */
interface RunTrace {
  readonly tracer: Tracer.Tracer
  /** The tracer the root run found (the operator's): a delegated run's tracer passes its spans there, not to ours. */
  readonly outer: Tracer.Tracer
  readonly capture: boolean
  readonly operatorTracing: boolean
  readonly span: Tracer.Span | undefined
}
const CurrentTrace = FiberRef.unsafeMake<RunTrace | undefined>(undefined)

/** Whether the run this fiber works for keeps content in its trace (its expert's `trace_content`). */
export const contentCaptured: Effect.Effect<boolean> = Effect.map(FiberRef.get(CurrentTrace), (trace) => trace?.capture === true)

/**
 * Runs `effect` (a run) with its own tracer when a sink is there. Tracing is not switched on for the run: only the
 * GenAI spans (`genAiSpan`) are made, straight from the run's tracer, so a run costs a handful of spans, not one per
 * `Effect.fn` inside it. When the operator exports spans (tracing on for the process), every span inside goes
 * through the run's tracer to the operator's exporter as before, nested under the GenAI spans.
 */
export const traced = <A, E, R>(sink: Option.Option<TraceSink["Type"]>, run: TraceRun, effect: Effect.Effect<A, E, R>) =>
  Option.match(sink, {
    onNone: () => effect,
    onSome: (sink) =>
      Effect.flatMap(Effect.all([Effect.tracer, FiberRef.get(FiberRef.currentTracerEnabled), FiberRef.get(CurrentTrace)]), ([found, enabled, above]) => {
        const outer = above?.outer ?? found
        const tracer = runTracer(sink, run, outer, enabled)
        // A delegated run's root hangs under the delegating tool call's span, in its trace.
        const withTrace = Effect.locally(effect, CurrentTrace, {
          tracer,
          outer,
          capture: run.captureContent,
          operatorTracing: enabled,
          span: above?.span
        })
        return enabled ? Effect.withTracer(withTrace, tracer) : withTrace
      })
  })

/**
 * `effect` as one GenAI span (recorded: its attributes name the operation), made by the run's tracer and ended with
 * `effect`'s exit, as `Effect.withSpan` would, without switching tracing on for what runs inside.
 */
export const genAiSpan = (
  name: string,
  options: { readonly attributes: Record<string, unknown>; readonly kind?: Tracer.SpanKind }
) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(FiberRef.get(CurrentTrace), (trace) => {
    if (trace === undefined) return Effect.withSpan(effect, name, options)
    return Effect.flatMap(
      trace.span === undefined && trace.operatorTracing ? Effect.option(Effect.currentParentSpan) : Effect.succeed(Option.fromNullable(trace.span)),
      (parent) =>
        Effect.flatMap(Clock.currentTimeNanos, (start) => {
          const span = trace.tracer.span(name, parent, Context.empty(), [], start, options.kind ?? "internal", options)
          for (const [key, value] of Object.entries(options.attributes)) span.attribute(key, value)
          const body = Effect.locally(effect, CurrentTrace, { ...trace, span })
          return Effect.onExit(
            trace.operatorTracing ? Effect.withParentSpan(body, span) : body,
            (exit) => Effect.map(Clock.currentTimeNanos, (end) => span.end(end, exit))
          )
        })
    )
  })

/** Sets attributes of the innermost GenAI span (none: nothing). */
export const annotateSpan = (attributes: Record<string, unknown>) =>
  Effect.map(FiberRef.get(CurrentTrace), (trace) => {
    const span = trace?.span
    if (span === undefined) return
    for (const [key, value] of Object.entries(attributes)) span.attribute(key, value)
  })

/** Adds what the innermost GenAI span was charged (micro-credits): a model step, a tool's own charge. */
export const chargedToSpan = (credits: Micros) =>
  credits > 0n ? annotateSpan({ [Attr.credits]: credits }) : Effect.void
