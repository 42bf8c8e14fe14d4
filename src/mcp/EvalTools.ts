import { Effect, Option, Schema } from "effect"
import { errorType } from "../platform/Errors.js"
import { EvalRowId, EvalRunId, Grader } from "../evals/Domain.js"
import { EvalDatasetId } from "../platform/Ids.js"
import { Evals } from "../evals/Evals.js"
import { type McpCaller, type ToolDefinition, ToolFailure, userTool } from "./Tool.js"
import type { CallerIdentity } from "../identity/Domain.js"

/**
 * Evaluations from an IDE (issue 46 item 3, docs/evals.md "From an IDE"): start an eval run of a dataset and read
 * its results, as `POST /v1/evals/runs` and `GET /v1/evals/runs/:id/results` do, with their rules: the expert's
 * creator only, acting as their account.
 */

const proxy = <A, E extends { readonly _tag: string; readonly message: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.mapError(effect, (error) => new ToolFailure({ type: errorType(error._tag), message: error.message }))

const callerOf = (caller: McpCaller): CallerIdentity => ({
  userId: caller.userId,
  via: caller.via,
  apiKeyId: Option.fromNullable(caller.apiKeyId),
  endUserId: Option.none()
})

const text = (description: string) =>
  Schema.propertySignature(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100))).annotations({ description })

/** An id argument, unchecked as the HTTP path's: one of another kind is one that is not there ("not found"). */
const idOf = <A extends string>(id: Schema.Schema<A, string>, description: string) =>
  Schema.propertySignature(id.pipe(Schema.minLength(1), Schema.maxLength(100))).annotations({ description })

export class EvalTools extends Effect.Service<EvalTools>()("atrium/mcp/EvalTools", {
  effect: Effect.gen(function*() {
    const evals = yield* Evals

    const tools: ReadonlyArray<ToolDefinition> = [
      userTool(
        "run_eval",
        "Run one of your expert's datasets against it (its draft, or a published `version`) as background runs on your " +
          "wallet, grading each row with `graders` (exact, contains, regex, json_schema, tool_trajectory, budget, " +
          "llm_judge). Answers at once with the run's id and its cost estimate; follow it with get_eval_results.",
        Schema.Struct({
          dataset: idOf(EvalDatasetId.unchecked, "The dataset's id (eds_...)"),
          agent: text("The expert's identifier"),
          version: Schema.optional(Schema.Int.pipe(Schema.positive())).annotations({ description: "A published version (default: the draft)" }),
          graders: Schema.propertySignature(Schema.Array(Grader).pipe(Schema.minItems(1), Schema.maxItems(10)))
            .annotations({ description: "How to grade each row, e.g. [{\"type\": \"exact\"}]" }),
          concurrency: Schema.optional(Schema.Int.pipe(Schema.between(1, 20))).annotations({ description: "Rows at once, 1-20 (default 4)" })
        }),
        (args, caller) => proxy(evals.createRun(callerOf(caller), args))
      ),
      userTool(
        "cancel_eval",
        "Cancel one of your running eval runs: rows not started never start, and rows' runs under way are cancelled, " +
          "billed only for what they finished. Answers the eval run (`cancelled`); an eval run that has ended is answered as it is.",
        Schema.Struct({ id: idOf(EvalRunId.unchecked, "The eval run's id (evr_...)") }),
        (args, caller) => proxy(evals.cancelRun(callerOf(caller), args.id))
      ),
      userTool(
        "get_eval_results",
        "An eval run's status, pass rate and credits, and its rows' results (passed, score, why, the row's run and " +
          "trace), in dataset order; page with `after` (the last row_id).",
        Schema.Struct({
          id: idOf(EvalRunId.unchecked, "The eval run's id (evr_...)"),
          limit: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, 100)), { default: () => 50 })
            .annotations({ description: "Rows per page, 1-100 (default 50)", default: 50 }),
          after: Schema.optional(EvalRowId.unchecked.pipe(Schema.maxLength(100))).annotations({ description: "The last row_id of the previous page" })
        }),
        (args, caller) =>
          Effect.gen(function*() {
            const run = yield* proxy(evals.getRun(callerOf(caller), args.id))
            const page = yield* proxy(evals.results(callerOf(caller), args.id, { limit: args.limit, after: args.after }))
            return { run, results: page.data, has_more: page.has_more }
          })
      )
    ]
    return { tools } as const
  }),
  dependencies: [Evals.Default]
}) {}
