import { Effect } from "effect"
import { type McpCaller, ToolFailure } from "./Tool.js"

/**
 * The six tools that need the run engine (spec 4.10: Testing, Distillation, Self-evolution). Their names, schemas
 * and descriptions live in the tool table (`Tools.ts`) and are listed already; their work is this service's, which
 * fails with "not available yet" until the run engine exists. To implement them, replace this file: keep the six
 * method names and argument shapes, add the engine to `effect`/`dependencies`, and return plain JSON values (the
 * tool table turns them into MCP results, and a `ToolFailure` into an `isError` result).
 *
 * Spec 4.10 rules 6, 7 and 9 are theirs: `test_expert` really runs and bills credits; `start_distillation` returns a
 * `sessionId` that `continue_distillation` takes, both folding an event stream into one return; `accept_evolution`
 * takes effect at once, without review.
 */

export interface TestExpertArgs {
  readonly identifier: string
  readonly message: string
}
export interface StartDistillationArgs {
  readonly topic: string
  readonly materials: ReadonlyArray<{ readonly filename: string; readonly content: string }>
}
export interface ContinueDistillationArgs {
  readonly sessionId: string
  readonly message: string
}

const notAvailable = (tool: string) =>
  Effect.fail(
    new ToolFailure({
      type: "not_available",
      message: `${tool} is not available yet: the run engine it needs is not part of this server yet.`
    })
  )

export class EngineTools extends Effect.Service<EngineTools>()("atrium/mcp/EngineTools", {
  succeed: {
    testExpert: (_args: TestExpertArgs, _caller: McpCaller): Effect.Effect<unknown, ToolFailure> =>
      notAvailable("test_expert"),
    startDistillation: (_args: StartDistillationArgs, _caller: McpCaller): Effect.Effect<unknown, ToolFailure> =>
      notAvailable("start_distillation"),
    continueDistillation: (_args: ContinueDistillationArgs, _caller: McpCaller): Effect.Effect<unknown, ToolFailure> =>
      notAvailable("continue_distillation"),
    listEvolutionSuggestions: (_args: { readonly identifier: string }, _caller: McpCaller): Effect.Effect<unknown, ToolFailure> =>
      notAvailable("list_evolution_suggestions"),
    acceptEvolution: (_args: { readonly suggestionId: string }, _caller: McpCaller): Effect.Effect<unknown, ToolFailure> =>
      notAvailable("accept_evolution"),
    getEvolutionStats: (_args: { readonly identifier: string }, _caller: McpCaller): Effect.Effect<unknown, ToolFailure> =>
      notAvailable("get_evolution_stats")
  }
}) {}
