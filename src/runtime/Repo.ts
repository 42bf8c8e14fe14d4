import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Option, Schema } from "effect"
import { type AgentId, UserId } from "../platform/Ids.js"
import type { Partition } from "../identity/Partition.js"
import type { RunId } from "./Domain.js"

export interface RunRecord {
  readonly id: string
  readonly agentId: string | null
  readonly agentVersion: number | null
  readonly payerId: string
  readonly endUserId: string
  readonly sessionId: string | null
  readonly parentRunId: string | null
  /** The agent's identifier (a bare model's id), what `GET /v1/runs/:id` names as `agent`. */
  readonly agent?: string | undefined
}

export interface RunOutcome {
  readonly status: "completed" | "failed" | "cancelled"
  readonly failureCode: string | null
  readonly failureMessage: string | null
  readonly inputTokens: number
  readonly outputTokens: number
  readonly creditsCharged: bigint
  /** Characters of the answer's text, surrounding whitespace not counted: 0 is a run that said nothing. */
  readonly answerChars: number
  /** The tool of each denied call, in order; how many calls were denied is its length. */
  readonly deniedTools: ReadonlyArray<string>
  /** The answer's text, every step's joined (what `GET /v1/runs/:id` says as `output`). */
  readonly output?: string | undefined
}

const Owner = { accountId: UserId, endUserId: Schema.String }
const Trial = Schema.Struct({ agentId: Schema.String, payerId: Schema.String, limit: Schema.Number })
const Used = Schema.Struct({ used: Schema.Number })
const Workspace = Schema.Struct({ ...Owner, workspace: Schema.String })
const WorkspacePath = Schema.Struct({ ...Owner, workspace: Schema.String, path: Schema.String })

const WorkspaceFileRow = Schema.Struct({ path: Schema.String, size: Schema.Number, updatedAt: Schema.DateFromSelf })
export type WorkspaceFileRow = typeof WorkspaceFileRow.Type

const owner = (partition: Partition) => ({ accountId: partition.accountId, endUserId: partition.endUserId })

/** Runs, free trials and workspace files (memory is src/memory/). SQL errors are defects here. */
export class RunsRepo extends Effect.Service<RunsRepo>()("atrium/runtime/RunsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const insertRun = SqlSchema.void({
      Request: Schema.Struct({
        id: Schema.String,
        agentId: Schema.NullOr(Schema.String),
        agentVersion: Schema.NullOr(Schema.Number),
        payerId: Schema.String,
        endUserId: Schema.String,
        sessionId: Schema.NullOr(Schema.String),
        parentRunId: Schema.NullOr(Schema.String),
        agent: Schema.NullOr(Schema.String)
      }),
      execute: (run) =>
        sql`
          INSERT INTO runs (id, agent_id, agent_version, payer_id, end_user_id, session_id, parent_run_id, status, agent,
                            started_at)
          VALUES (${run.id}, ${run.agentId}, ${run.agentVersion}, ${run.payerId}, ${run.endUserId}, ${run.sessionId},
                  ${run.parentRunId}, 'running', ${run.agent}, now())`
    })
    const start = (run: RunRecord) => Effect.orDie(insertRun({ ...run, agent: run.agent ?? null }))
    /**
     * A run whose id is its identity, started again by every execution of its parent's workflow (a durable
     * delegation's child, RunEngine): the first start writes its row, the next ones leave it.
     */
    const startOnce = (run: RunRecord) =>
      Effect.orDie(Effect.asVoid(sql`
        INSERT INTO runs (id, agent_id, agent_version, payer_id, end_user_id, session_id, parent_run_id, status, agent,
                          started_at)
        VALUES (${run.id}, ${run.agentId}, ${run.agentVersion}, ${run.payerId}, ${run.endUserId}, ${run.sessionId},
                ${run.parentRunId}, 'running', ${run.agent ?? null}, now())
        ON CONFLICT (id) DO NOTHING`))

    const finishRun = SqlSchema.void({
      Request: Schema.Struct({
        runId: Schema.String,
        status: Schema.Literal("completed", "failed", "cancelled"),
        failureCode: Schema.NullOr(Schema.String),
        failureMessage: Schema.NullOr(Schema.String),
        inputTokens: Schema.Number,
        outputTokens: Schema.Number,
        creditsCharged: Schema.BigInt,
        answerChars: Schema.Number,
        toolsDenied: Schema.Number,
        deniedTools: Schema.parseJson(Schema.Array(Schema.String)),
        output: Schema.NullOr(Schema.String)
      }),
      execute: (outcome) =>
        sql`
          UPDATE runs SET status = ${outcome.status}, failure_code = ${outcome.failureCode},
            failure_message = ${outcome.failureMessage}, input_tokens = ${outcome.inputTokens},
            output_tokens = ${outcome.outputTokens}, credits_charged = ${outcome.creditsCharged},
            tools_denied = ${outcome.toolsDenied}, answer_chars = ${outcome.answerChars},
            denied_tools = ${outcome.deniedTools}::jsonb, output = ${outcome.output}, finished_at = now()
          WHERE id = ${outcome.runId} AND status = 'running'`
    })
    const finish = (runId: RunId, outcome: RunOutcome) => Effect.orDie(finishRun({ runId, ...outcome, output: outcome.output ?? null, toolsDenied: outcome.deniedTools.length }))

    /**
     * A finished run's credits less `refused`: charges its settle posted later than its end (the wallet answered
     * after the run's row was written) and the wallet refused, so the row says what the ledger took. Whether the row
     * was there to correct (not while the run's row is still `running`: a session writes it with the turn's commit).
     */
    const lessCreditsOf = SqlSchema.findAll({
      Request: Schema.Struct({ runId: Schema.String, refused: Schema.BigInt }),
      Result: Schema.Struct({ id: Schema.String }),
      execute: ({ refused, runId }) =>
        sql`
          UPDATE runs SET credits_charged = GREATEST(0, credits_charged - ${refused}::bigint)
          WHERE id = ${runId} AND status <> 'running' RETURNING id`
    })
    const lessCredits = (runId: RunId, refused: bigint) => Effect.map(Effect.orDie(lessCreditsOf({ runId, refused })), (rows) => rows.length > 0)

    const claimTrial = SqlSchema.findOne({
      Request: Trial,
      Result: Used,
      execute: ({ agentId, limit, payerId }) =>
        sql`
          INSERT INTO agent_trials (agent_id, payer_id, end_user_id, used)
          VALUES (${agentId}, ${payerId}, '', 1)
          ON CONFLICT (agent_id, payer_id, end_user_id)
          DO UPDATE SET used = agent_trials.used + 1 WHERE agent_trials.used < ${limit}
          RETURNING used`
    })
    const trialsUsed = SqlSchema.findOne({
      Request: Trial,
      Result: Used,
      execute: ({ agentId, payerId }) =>
        sql`SELECT used FROM agent_trials WHERE agent_id = ${agentId} AND payer_id = ${payerId} AND end_user_id = ''`
    })

    /**
     * Takes one free-trial turn if fewer than `limit` were used: the count and the check are one statement, so two
     * concurrent runs cannot both take the last trial. One allowance per account and expert (`end_user_id = ''`,
     * migration 0010): the account's end users share it. None when the trials are used up (with how many were used).
     */
    const takeTrial = (agentId: AgentId, payerId: UserId, limit: number) =>
      Effect.gen(function*() {
        if (limit > 0) {
          const taken = yield* claimTrial({ agentId, payerId, limit })
          if (Option.isSome(taken)) return { taken: true, used: taken.value.used }
        }
        const used = yield* trialsUsed({ agentId, payerId, limit })
        return { taken: false, used: Option.match(used, { onNone: () => 0, onSome: (row) => row.used }) }
      }).pipe(Effect.orDie)

    const upsertFile = SqlSchema.void({
      Request: Schema.Struct({ ...WorkspacePath.fields, content: Schema.String }),
      execute: (file) =>
        sql`
          INSERT INTO workspace_files (account_id, end_user_id, workspace, path, content)
          VALUES (${file.accountId}, ${file.endUserId}, ${file.workspace}, ${file.path}, ${file.content})
          ON CONFLICT (account_id, end_user_id, workspace, path)
          DO UPDATE SET content = EXCLUDED.content, updated_at = now()`
    })
    const writeFile = (partition: Partition, workspace: string, path: string, content: string) =>
      Effect.orDie(upsertFile({ ...owner(partition), workspace, path, content }))

    const fileContent = SqlSchema.findOne({
      Request: WorkspacePath,
      Result: Schema.Struct({ content: Schema.String }),
      execute: (file) =>
        sql`
          SELECT content FROM workspace_files
          WHERE account_id = ${file.accountId} AND end_user_id = ${file.endUserId}
            AND workspace = ${file.workspace} AND path = ${file.path}`
    })
    const readFile = (partition: Partition, workspace: string, path: string) =>
      fileContent({ ...owner(partition), workspace, path }).pipe(
        Effect.map(Option.map((row) => row.content)),
        Effect.orDie
      )

    const workspaceFiles = SqlSchema.findAll({
      Request: Workspace,
      Result: WorkspaceFileRow,
      execute: (at) =>
        sql`
          SELECT path, length(content) AS size, updated_at FROM workspace_files
          WHERE account_id = ${at.accountId} AND end_user_id = ${at.endUserId} AND workspace = ${at.workspace}
          ORDER BY path LIMIT 1000`
    })
    const listFiles = (partition: Partition, workspace: string) =>
      Effect.orDie(workspaceFiles({ ...owner(partition), workspace }))

    const filesUnderRow = SqlSchema.single({
      Request: Schema.Struct({ ...Workspace.fields, prefix: Schema.String, path: Schema.String }),
      Result: Schema.Struct({ count: Schema.Number, present: Schema.Boolean }),
      execute: (at) =>
        sql`
          SELECT count(*)::int AS count, COALESCE(bool_or(path = ${at.path}), false) AS present FROM workspace_files
          WHERE account_id = ${at.accountId} AND end_user_id = ${at.endUserId} AND workspace = ${at.workspace}
            AND starts_with(path, ${at.prefix})`
    })
    /** How many files the workspace holds under `prefix`, and whether `path` is one of them (one read, no listing). */
    const filesUnder = (partition: Partition, workspace: string, prefix: string, path: string) =>
      Effect.orDie(filesUnderRow({ ...owner(partition), workspace, prefix, path }))

    const removeWorkspace = SqlSchema.void({
      Request: Workspace,
      execute: (at) =>
        sql`
          DELETE FROM workspace_files
          WHERE account_id = ${at.accountId} AND end_user_id = ${at.endUserId} AND workspace = ${at.workspace}`
    })
    const deleteWorkspace = (partition: Partition, workspace: string) =>
      Effect.orDie(removeWorkspace({ ...owner(partition), workspace }))

    const purchase = SqlSchema.findOne({
      Request: Schema.Struct({ userId: Schema.String, agentId: Schema.String }),
      Result: Schema.Struct({ found: Schema.Literal(1) }),
      execute: ({ agentId, userId }) =>
        sql`SELECT 1 AS found FROM purchases WHERE user_id = ${userId} AND agent_id = ${agentId}`
    })
    const hasPurchased = (userId: UserId, agentId: AgentId) =>
      purchase({ userId, agentId }).pipe(Effect.map(Option.isSome), Effect.orDie)

    return { start, startOnce, finish, lessCredits, hasPurchased, takeTrial, writeFile, readFile, listFiles, filesUnder, deleteWorkspace } as const
  })
}) {}
