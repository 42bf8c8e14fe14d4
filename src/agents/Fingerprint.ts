import { createHash } from "node:crypto"
import type { AgentConfig } from "./Agent.js"

/** Nothing said: a setting absent, null, empty text or an empty list means the same to the engine. */
const empty = (u: unknown) =>
  u === undefined || u === null || u === "" || (Array.isArray(u) && u.length === 0) ||
  (typeof u === "object" && u !== null && !Array.isArray(u) && Object.keys(u).length === 0)

/**
 * Keys sorted, and empty settings left out: the studio saves every field of its form (an empty list where the API
 * left a field out), and saving an unchanged draft must not make its eval run stale.
 */
const canonical = (u: unknown): unknown =>
  Array.isArray(u)
    ? u.map(canonical)
    : typeof u === "object" && u !== null
    ? Object.fromEntries(
      Object.keys(u).sort()
        .map((k) => [k, canonical((u as Record<string, unknown>)[k])] as const)
        .filter(([, v]) => !empty(v))
    )
    : u

/**
 * The fingerprint of what an expert's configuration makes it answer (docs/evals.md, "Publish gate"): the settings
 * that do not change answers (trace capture, OTLP export, the eval gate itself) left out, so setting the gate after
 * evaluating the draft keeps that evaluation.
 */
export const configHash = (config: AgentConfig): string => {
  const { eval_gate: _gate, otlp_export: _otlp, trace_content: _content, ...rest } = config
  return createHash("sha256").update(JSON.stringify(canonical(rest))).digest("hex").slice(0, 32)
}
