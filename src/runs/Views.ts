import { toNumber } from "../platform/Money.js"
import type { RunRow } from "./Repo.js"

/** `running` is a run in progress, `in_progress` on the wire (OpenAI's word, which the Responses object uses too). */
export const wireStatus = (status: RunRow["status"]): Exclude<RunRow["status"], "running"> | "in_progress" =>
  status === "running" ? "in_progress" : status
export const rowStatus = (status: string) => (status === "in_progress" ? "running" : status)

/** A run's row as the run object of `GET /v1/runs/:id`. */
export const runObject = (row: RunRow) => ({
  id: row.id,
  object: "run" as const,
  agent: row.agent,
  status: wireStatus(row.status),
  background: row.background,
  output: row.output ?? (row.sessionId === null ? "" : null),
  usage: { input_tokens: row.inputTokens, output_tokens: row.outputTokens },
  credits_charged: toNumber(row.creditsCharged),
  error: row.status === "failed" ? { code: row.failureCode ?? "internal_error", message: row.failureMessage ?? "" } : null,
  incomplete_details: row.status === "incomplete" ? { reason: row.incompleteReason ?? "max_duration" } : null,
  session_id: row.sessionId,
  parent_run_id: row.parentRunId,
  created_at: row.createdAt.toISOString(),
  started_at: row.startedAt?.toISOString() ?? null,
  completed_at: row.finishedAt?.toISOString() ?? null,
  expires_at: row.deadlineAt?.toISOString() ?? null,
  cancel_requested: row.cancelRequested
})
