import { type Duration, Effect, Option } from "effect"
import type { InternalEvent } from "../runtime/Events.js"
import type { RunnableAgent, RunRequest, RunResult } from "../runtime/Run.js"
import type { RunEngine } from "../runtime/RunEngine.js"
import type { Partition } from "../identity/Partition.js"

/**
 * One run folded into one return, for callers that answer synchronously (the MCP tools `test_expert`,
 * `start_distillation`, `continue_distillation`): the run's result and its events, under a time limit, telling its
 * progress as it goes. A run past the limit is interrupted (the engine records it `cancelled`).
 */

/** Where progress goes: a step number that only grows, and what is happening. */
export type ProgressReport = (progress: number, message: string) => Effect.Effect<void>

export const noProgress: ProgressReport = () => Effect.void

/** What a progress report says about an event; undefined for events not worth one (text increments, ...). */
const progressNote = (event: InternalEvent): string | undefined => {
  switch (event.type) {
    case "preparing":
      return "Run started"
    case "turn_start":
      return `Thinking (model call ${event.turn})`
    case "tool_call":
      return event.status === "running" ? `Running tool ${event.name}` : undefined
    case "tool_denied":
      return `Tool ${event.name} denied`
    case "Ask":
      return `Waiting for approval of ${event.name}`
    case "delegation_started":
      return `Delegating to ${event.agent}`
    case "complete":
      return "Run completed"
    case "error":
      return `Run failed: ${event.code}`
    default:
      return undefined
  }
}

export type Folded =
  | { readonly _tag: "Finished"; readonly result: RunResult; readonly events: ReadonlyArray<InternalEvent> }
  | { readonly _tag: "TimedOut"; readonly events: ReadonlyArray<InternalEvent> }

export const foldRun = (
  engine: RunEngine,
  request: RunRequest,
  options: {
    readonly timeout: Duration.DurationInput
    readonly progress: ProgressReport
    readonly resolveSubagent?: (identifier: string, payer: Partition) => Effect.Effect<Option.Option<RunnableAgent>>
  }
): Effect.Effect<Folded> =>
  Effect.gen(function*() {
    const events: Array<InternalEvent> = []
    let step = 0
    const emit = (event: InternalEvent) =>
      Effect.suspend(() => {
        events.push(event)
        const note = progressNote(event)
        // A client that cannot take a notification any more must not stop the run.
        return note === undefined ? Effect.void : Effect.ignore(Effect.catchAllDefect(options.progress(++step, note), () => Effect.void))
      })
    const resolve = options.resolveSubagent ?? (() => Effect.succeed(Option.none<RunnableAgent>()))
    const result = yield* engine.execute(request, emit, resolve).pipe(Effect.timeout(options.timeout), Effect.option)
    return Option.match(result, {
      onNone: (): Folded => ({ _tag: "TimedOut", events }),
      onSome: (result): Folded => ({ _tag: "Finished", result, events })
    })
  })
