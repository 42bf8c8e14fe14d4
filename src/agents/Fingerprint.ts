import { createHash } from "node:crypto"
import type { AgentConfig } from "./Agent.js"

const canonical = (u: unknown): unknown =>
  Array.isArray(u)
    ? u.map(canonical)
    : typeof u === "object" && u !== null
    ? Object.fromEntries(Object.keys(u).sort().map((k) => [k, canonical((u as Record<string, unknown>)[k])]))
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
