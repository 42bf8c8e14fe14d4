import { Effect, Option, Schema } from "effect"
import { errorType } from "../platform/Errors.js"
import { RunId } from "../runtime/Domain.js"
import { BackgroundRuns } from "../runs/Background.js"
import { RunRecords } from "../runs/Repo.js"
import { rowStatus, runObject } from "../runs/Views.js"
import { CronExpression, Missed, TimeZoneName } from "../schedules/Domain.js"
import { Schedules } from "../schedules/Schedules.js"
import { Sessions } from "../sessions/Sessions.js"
import { type McpCaller, type ToolDefinition, ToolFailure, userTool } from "./Tool.js"
import type { CallerIdentity } from "../identity/Domain.js"
import type { Partition } from "../identity/Partition.js"

/**
 * Runs and schedules from an IDE (issue 43 item 5, docs/mcp.md): beside the spec's 22 tools. A creator follows the
 * background runs of their experts and sets them on a schedule without leaving the editor. They act in the caller's
 * account-wide partition (no end user), as the studio does; the HTTP routes' rules and limits apply unchanged.
 */

const proxy = <A, E extends { readonly _tag: string; readonly message: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.mapError(effect, (error) => new ToolFailure({ type: errorType(error._tag), message: error.message }))

const runId = Schema.propertySignature(RunId.unchecked.pipe(Schema.minLength(1), Schema.maxLength(100)))
  .annotations({ description: "The run's id (run_...)" })

const RunStatus = Schema.Literal("queued", "in_progress", "completed", "failed", "cancelled", "incomplete")

/** The MCP caller as the routes' caller: the account itself, no end user. */
const callerOf = (caller: McpCaller): CallerIdentity => ({
  userId: caller.userId,
  via: caller.via,
  apiKeyId: Option.fromNullable(caller.apiKeyId),
  endUserId: Option.none()
})
const account = (caller: McpCaller): Partition => ({ accountId: caller.userId, endUserId: "" })

export class RunTools extends Effect.Service<RunTools>()("atrium/mcp/RunTools", {
  effect: Effect.gen(function*() {
    const records = yield* RunRecords
    const background = yield* BackgroundRuns
    const schedules = yield* Schedules
    const sessions = yield* Sessions

    const tools: ReadonlyArray<ToolDefinition> = [
      userTool(
        "list_runs",
        "Your runs, newest first (background runs and the rest): status, output, credits. Filter by expert or status.",
        Schema.Struct({
          identifier: Schema.optional(Schema.String.pipe(Schema.maxLength(200))).annotations({ description: "Only this expert's runs" }),
          status: Schema.optional(RunStatus).annotations({ description: "Only runs in this status" }),
          limit: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, 100)), { default: () => 20 })
            .annotations({ description: "How many, 1-100 (default 20)", default: 20 })
        }),
        (args, caller) =>
          Effect.map(
            records.list(account(caller), {
              agent: args.identifier ?? null,
              status: args.status === undefined ? null : rowStatus(args.status),
              createdAfter: null,
              createdBefore: null,
              after: null,
              limit: args.limit
            }),
            (page) => ({ runs: page.data.map(runObject), has_more: page.hasMore })
          )
      ),
      userTool(
        "get_run",
        "One run: its status, output, usage, credits and error.",
        Schema.Struct({ runId }),
        ({ runId }, caller) => Effect.map(proxy(background.get(account(caller), runId)), runObject)
      ),
      userTool(
        "cancel_run",
        "Stop a background run, or a conversation turn's run; it bills only what it used. Cancelling a run that has " +
          "ended answers it as it is.",
        Schema.Struct({ runId }),
        ({ runId }, caller) =>
          Effect.gen(function*() {
            // A session's turn is the session's to stop, as POST /v1/runs/{id}/cancel does.
            const run = yield* proxy(background.get(account(caller), runId))
            return runObject(
              run.sessionId !== null
                ? yield* proxy(sessions.cancelTurn(callerOf(caller), runId))
                : yield* proxy(background.cancel(account(caller), runId))
            )
          })
      ),
      userTool(
        "create_schedule",
        "Run an expert on a cron schedule (5 fields, in an IANA time zone), each firing a background run with `input`.",
        Schema.Struct({
          identifier: Schema.propertySignature(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)))
            .annotations({ description: "The expert to run" }),
          cron: Schema.propertySignature(CronExpression).annotations({ description: "minute hour day-of-month month day-of-week" }),
          timezone: Schema.optional(TimeZoneName).annotations({ description: "An IANA zone (default UTC)" }),
          input: Schema.propertySignature(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(32_000)))
            .annotations({ description: "The message each firing sends" }),
          missed: Schema.optional(Missed)
        }),
        (args, caller) =>
          proxy(schedules.create(callerOf(caller), {
            agent: args.identifier,
            cron: args.cron,
            input: args.input,
            ...(args.timezone === undefined ? {} : { timezone: args.timezone }),
            ...(args.missed === undefined ? {} : { missed: args.missed })
          }))
      ),
      userTool(
        "list_schedules",
        "Your schedules: expert, cron, zone, status, next and last firing.",
        Schema.Struct({}),
        (_args, caller) => Effect.map(proxy(schedules.list(callerOf(caller), { limit: 100 })), (page) => ({ schedules: page.data }))
      )
    ]
    return { tools } as const
  }),
  dependencies: [RunRecords.Default, BackgroundRuns.Default, Schedules.Default, Sessions.Default]
}) {}
