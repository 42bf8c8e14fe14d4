/**
 * Which suite runs each test file: the one home of that rule (docs/testing.md, "Which suite runs a file").
 *
 * `npm test` runs in the mode its environment gives: embedded (no `DATABASE_URL`: PGlite and the in-memory store) or
 * services (`DATABASE_URL` and `REDIS_URL`: PostgreSQL and Redis). CI runs both. A file runs in both suites unless it
 * is named here; `vitest.config.ts` leaves a file named here out of the other suite, and
 * `test/platform/suites.test.ts` checks what each entry claims.
 *
 * A file runs once when the second suite would prove nothing the first did not: the storage under it is not the run's
 * (a process started from `dist/` is given no `DATABASE_URL`), or it has none, or what it tests is the embedded path
 * itself. A file runs in the services suite only when it needs what only PostgreSQL gives: runners of one cluster.
 */

/** Why a file runs in the embedded suite only. */
export type Once =
  /** No storage at all (pure functions, parsers, the sandbox on its own, in-memory layers): checked, it reaches no
   * test helper that opens a storage and reads no `DATABASE_URL`/`REDIS_URL` of its own. */
  | "unit"
  /** Starts `dist/main.js`, which runs embedded whatever the mode (it is given no `DATABASE_URL`): checked, it starts a
   * process and builds no storage of the run's mode (no `TestServer.layer`, no `makeStorage`/`makeMigratedStorage`). */
  | "process"
  /** In process over the run's storage, but what it proves does not depend on it, or is the embedded path itself:
   * the reason says which (read by a reviewer; the rule cannot tell). */
  | { readonly embedded: string }

export const EMBEDDED_ONLY: Readonly<Record<string, Once>> = {
  // Processes from dist/, embedded whatever the mode.
  "test/main.test.ts": "process",
  "test/artifact.test.ts": "process",
  "test/platform/secrets-config.test.ts": "process",
  "test/platform/telemetry.test.ts": "process",
  "test/security/edge.test.ts": "process",
  "test/security/sandbox-escape.test.ts": "process",
  "test/security/sandbox-output.test.ts": "process",
  // In process, over the run's storage.
  "test/runtime/sandbox.test.ts": {
    embedded:
      "run_code through sessions: what it tests is the sandbox, the same over either storage, and its Pyodide loads cost " +
      "about 30 CPU-seconds a run; sessions over PostgreSQL are the services suite's sessions tests"
  },
  "test/billing/wallet-local.test.ts": {
    embedded:
      "a wallet charged on its own runner through the local path, the embedded runner's; in services mode ClusterLive " +
      "is the clustered runner, which built alone (no server around it) never answered, and the same path is taken by " +
      "the HTTP suites (test/billing/concurrency.test.ts, wallet.test.ts), whose one runner owns every wallet"
  },
  // The contract as clients see it: what they read is the server's answer, the same over either storage, and every
  // route's storage is the services suite's through the domains' own files (session 27: a third of CI's time was
  // these files run twice).
  "test/openai/openapi.test.ts": { embedded: "what the OpenAPI document says (streams, headers, servers, summaries): built from the contract, not the storage" },
  "test/openai/typed-client.test.ts": { embedded: "the typed client decoding the server's answers: the contract's shapes, the same over either storage" },
  "test/openai/failures.test.ts": {
    embedded: "which status a deterministic failure reaches each client with, and that it is retried by none: the error's mapping, not the storage"
  },
  "test/openai/structured-output.test.ts": {
    embedded: "structured answers through every client, checked against their schema before they are told: the engine's, not the storage's"
  },
  "test/runs/stream.test.ts": {
    embedded: "the stream's framing, its 20 events, a disconnect's cancel and heartbeats: the SSE layer over the engine; a run's storage is the runs suites'"
  },
  "test/mcp/errors.test.ts": { embedded: "MCP protocol errors and the 401 without a credential: the protocol layer, before any storage" },
  "test/mcp/engine.test.ts": {
    embedded:
      "the six engine tools' rules through the MCP client; the runs, wallets and agents they reach are checked over PostgreSQL by " +
      "the runs, billing and agents suites"
  },
  "test/security/text.test.ts": {
    embedded: "text PostgreSQL refuses is refused at the edge, before any storage (PGlite is PostgreSQL, and refuses it the same)"
  },
  "test/web/serving.test.ts": { embedded: "the web app's files served from WEB_DIST: no storage in what it proves" },
  // No storage.
  "test/agents/policy.test.ts": "unit",
  "test/billing/app-directory.test.ts": "unit",
  "test/billing/decide.test.ts": "unit",
  "test/billing/run-payer.test.ts": "unit",
  "test/cluster/fences.test.ts": "unit",
  "test/cluster/shard-assignment.test.ts": "unit",
  "test/distillation/distiller.test.ts": "unit",
  "test/evals/graders.test.ts": "unit",
  "test/evolution/suggestions.test.ts": "unit",
  "test/files/presign.test.ts": "unit",
  "test/identity/jwt.test.ts": "unit",
  "test/openai/client-sse.test.ts": "unit",
  "test/platform/bearer.test.ts": "unit",
  "test/platform/cluster-local.test.ts": "unit",
  "test/platform/config.test.ts": "unit",
  "test/platform/engines.test.ts": "unit",
  "test/platform/entity-caller.test.ts": "unit",
  "test/platform/entry-points.test.ts": "unit",
  "test/platform/ids.test.ts": "unit",
  "test/platform/policy.test.ts": "unit",
  "test/platform/shard-moves.test.ts": "unit",
  "test/platform/source-rules.test.ts": "unit",
  "test/platform/storable.test.ts": "unit",
  "test/platform/vitest-it.test.ts": "unit",
  "test/runs/outage-patience.test.ts": "unit",
  "test/runtime/admission.test.ts": "unit",
  "test/runtime/calculator.test.ts": "unit",
  "test/runtime/failure.test.ts": "unit",
  "test/runtime/heartbeat.test.ts": "unit",
  "test/runtime/model-chain.test.ts": "unit",
  "test/runtime/models/health.test.ts": "unit",
  "test/runtime/models/jsonSchema.test.ts": "unit",
  "test/runtime/models/providerConfig.test.ts": "unit",
  "test/schedules/policy.test.ts": "unit",
  "test/security/outbound.test.ts": "unit",
  "test/security/sandbox-cgroup.test.ts": "unit",
  "test/security/sandbox-channel.test.ts": "unit",
  "test/security/sandbox-layers.test.ts": "unit",
  "test/sessions/activation.test.ts": "unit",
  "test/sessions/window.test.ts": "unit",
  "test/traces/policy.test.ts": "unit",
  "test/web/bundle.test.ts": "unit",
  "test/web/outbox.test.ts": "unit",
  "test/web/stream.test.ts": "unit"
}

/** Runners of one cluster over one PostgreSQL (and Redis): embedded mode is one process by design. */
const CLUSTER = "runners of one cluster share a PostgreSQL; embedded mode is one process by design"

export const SERVICES_ONLY: Readonly<Record<string, string>> = {
  "test/cluster/approvals.test.ts": CLUSTER,
  "test/cluster/attach.test.ts": CLUSTER,
  "test/cluster/background.test.ts": CLUSTER,
  "test/cluster/cluster.test.ts": CLUSTER,
  "test/cluster/cluster-membership.test.ts": CLUSTER,
  "test/cluster/cluster-shutdown.test.ts": CLUSTER,
  "test/cluster/durable.test.ts": `${CLUSTER}; its harness needs Redis too`,
  "test/cluster/holds.test.ts": CLUSTER,
  "test/cluster/locks.test.ts": "advisory locks held by one database session and taken by another: PGlite is one session",
  "test/cluster/wallet-relay.test.ts": CLUSTER,
  "test/cluster/wallet-remote.test.ts": CLUSTER,
  "test/platform/notifications.test.ts": "PostgreSQL's LISTEN and NOTIFY between database sessions: embedded mode listens on nothing (one process)"
}

/** The files the suite of this mode leaves out: the other suite's own. */
export const leftOutOf = (mode: "embedded" | "services"): Array<string> =>
  Object.keys(mode === "services" ? EMBEDDED_ONLY : SERVICES_ONLY)
