import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Option } from "effect"
import type { Partition } from "../identity/Partition.js"

export interface RunRecord {
  readonly id: string
  readonly agentId: string | null
  readonly agentVersion: number | null
  readonly payerId: string
  readonly endUserId: string
  readonly sessionId: string | null
  readonly parentRunId: string | null
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
}

/** Runs, free trials, workspace files and memory. SQL errors are defects here. */
export class RunsRepo extends Effect.Service<RunsRepo>()("atrium/runtime/RunsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const start = (run: RunRecord) =>
      sql`
        INSERT INTO runs (id, agent_id, agent_version, payer_id, end_user_id, session_id, parent_run_id, status)
        VALUES (${run.id}, ${run.agentId}, ${run.agentVersion}, ${run.payerId}, ${run.endUserId}, ${run.sessionId},
                ${run.parentRunId}, 'running')`.pipe(Effect.asVoid, Effect.orDie)

    const finish = (runId: string, outcome: RunOutcome) =>
      sql`
        UPDATE runs SET status = ${outcome.status}, failure_code = ${outcome.failureCode},
          failure_message = ${outcome.failureMessage}, input_tokens = ${outcome.inputTokens},
          output_tokens = ${outcome.outputTokens}, credits_charged = ${outcome.creditsCharged.toString()},
          tools_denied = ${outcome.deniedTools.length}, answer_chars = ${outcome.answerChars},
          denied_tools = ${JSON.stringify(outcome.deniedTools)}::jsonb, finished_at = now()
        WHERE id = ${runId} AND status = 'running'`.pipe(Effect.asVoid, Effect.orDie)

    /**
     * Takes one free-trial turn if fewer than `limit` were used: the count and the check are one statement, so two
     * concurrent runs cannot both take the last trial. One allowance per account and expert (`end_user_id = ''`,
     * migration 0010): the account's end users share it. None when the trials are used up (with how many were used).
     */
    const takeTrial = (agentId: string, payerId: string, limit: number) =>
      Effect.gen(function*() {
        if (limit > 0) {
          const taken = yield* sql<{ used: number }>`
            INSERT INTO agent_trials (agent_id, payer_id, end_user_id, used)
            VALUES (${agentId}, ${payerId}, '', 1)
            ON CONFLICT (agent_id, payer_id, end_user_id)
            DO UPDATE SET used = agent_trials.used + 1 WHERE agent_trials.used < ${limit}
            RETURNING used`
          if (taken.length > 0) return { taken: true, used: taken[0]!.used }
        }
        const rows = yield* sql<{ used: number }>`
          SELECT used FROM agent_trials WHERE agent_id = ${agentId} AND payer_id = ${payerId} AND end_user_id = ''`
        return { taken: false, used: rows[0]?.used ?? 0 }
      }).pipe(Effect.orDie)

    const writeFile = (partition: Partition, workspace: string, path: string, content: string) =>
      sql`
        INSERT INTO workspace_files (account_id, end_user_id, workspace, path, content)
        VALUES (${partition.accountId}, ${partition.endUserId}, ${workspace}, ${path}, ${content})
        ON CONFLICT (account_id, end_user_id, workspace, path)
        DO UPDATE SET content = EXCLUDED.content, updated_at = now()`.pipe(Effect.asVoid, Effect.orDie)

    const readFile = (partition: Partition, workspace: string, path: string) =>
      sql<{ content: string }>`
        SELECT content FROM workspace_files
        WHERE account_id = ${partition.accountId} AND end_user_id = ${partition.endUserId}
          AND workspace = ${workspace} AND path = ${path}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => row.content)),
        Effect.orDie
      )

    const listFiles = (partition: Partition, workspace: string) =>
      sql<{ path: string; size: number; updatedAt: Date }>`
        SELECT path, length(content) AS size, updated_at FROM workspace_files
        WHERE account_id = ${partition.accountId} AND end_user_id = ${partition.endUserId} AND workspace = ${workspace}
        ORDER BY path LIMIT 1000`.pipe(Effect.orDie)

    const deleteWorkspace = (partition: Partition, workspace: string) =>
      sql`
        DELETE FROM workspace_files
        WHERE account_id = ${partition.accountId} AND end_user_id = ${partition.endUserId}
          AND workspace = ${workspace}`.pipe(Effect.asVoid, Effect.orDie)

    const saveMemory = (agentId: string, partition: Partition, text: string) =>
      sql<{ id: string }>`
        INSERT INTO agent_memories (agent_id, account_id, end_user_id, text)
        VALUES (${agentId}, ${partition.accountId}, ${partition.endUserId}, ${text}) RETURNING id`.pipe(
        Effect.map((rows) => String(rows[0]!.id)),
        Effect.orDie
      )

    /** Memories holding every word of the query (case-insensitive), newest first. */
    const searchMemory = (agentId: string, partition: Partition, words: ReadonlyArray<string>, limit: number) => {
      const patterns = words.map((word) => `%${word.replace(/[\\%_]/g, (c) => `\\${c}`)}%`)
      return sql<{ id: string; text: string; createdAt: Date }>`
        SELECT id, text, created_at FROM agent_memories
        WHERE agent_id = ${agentId} AND account_id = ${partition.accountId} AND end_user_id = ${partition.endUserId}
          AND ${sql.and(patterns.map((pattern) => sql`text ILIKE ${pattern}`))}
        ORDER BY id DESC LIMIT ${limit}`.pipe(Effect.orDie)
    }

    const hasPurchased = (userId: string, agentId: string) =>
      sql`SELECT 1 FROM purchases WHERE user_id = ${userId} AND agent_id = ${agentId}`.pipe(
        Effect.map((rows) => rows.length > 0),
        Effect.orDie
      )

    return { start, finish, hasPurchased, takeTrial, writeFile, readFile, listFiles, deleteWorkspace, saveMemory, searchMemory } as const
  })
}) {}
