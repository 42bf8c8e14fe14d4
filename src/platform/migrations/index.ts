import * as Migrator from "@effect/sql/Migrator"
import identity from "./0001_identity.js"
import billing from "./0002_billing.js"
import agents from "./0003_agents.js"
import files from "./0004_files.js"
import market from "./0005_market.js"
import runs from "./0006_runs.js"
import sessions from "./0007_sessions.js"
import evolution from "./0008_evolution.js"
import runEvidence from "./0009_run_evidence.js"
import accountTrials from "./0010_account_trials.js"
import tools from "./0011_tools.js"
import apiResponses from "./0012_api_responses.js"
import cluster from "./0013_cluster.js"
import sessionQueue from "./0014_session_queue.js"
import faults from "./0015_faults.js"
import knowledge from "./0016_knowledge.js"
import fences from "./0017_fences.js"
import durableRuns from "./0018_durable_runs.js"
import webhooks from "./0019_webhooks.js"
import walletHolds from "./0020_wallet_holds.js"
import sessionTrees from "./0021_session_trees.js"
import schedules from "./0023_schedules.js"
import traces from "./0024_traces.js"
import memory from "./0025_memory.js"
import turnFeedback from "./0027_turn_feedback.js"
import evals from "./0028_evals.js"
import durableApprovals from "./0030_durable_approvals.js"
import marketStore from "./0031_market_store.js"
import memoryExtractions from "./0033_memory_extractions.js"
import memoryCallKeys from "./0034_memory_call_keys.js"
import ledgerOrigins from "./0035_ledger_origins.js"

/** Numbered migrations, applied in order at start; a released migration is never edited, only followed. */
export const migrations = Migrator.fromRecord({
  "0001_identity": identity,
  "0002_billing": billing,
  "0003_agents": agents,
  "0004_files": files,
  "0005_market": market,
  "0006_runs": runs,
  "0007_sessions": sessions,
  "0008_evolution": evolution,
  "0009_run_evidence": runEvidence,
  "0010_account_trials": accountTrials,
  "0011_tools": tools,
  "0012_api_responses": apiResponses,
  "0013_cluster": cluster,
  "0014_session_queue": sessionQueue,
  "0015_faults": faults,
  "0016_knowledge": knowledge,
  "0017_fences": fences,
  "0018_durable_runs": durableRuns,
  "0019_webhooks": webhooks,
  "0020_wallet_holds": walletHolds,
  "0021_session_trees": sessionTrees,
  "0023_schedules": schedules,
  "0024_traces": traces,
  "0025_memory": memory,
  "0027_turn_feedback": turnFeedback,
  "0028_evals": evals,
  "0030_durable_approvals": durableApprovals,
  "0031_market_store": marketStore,
  "0033_memory_extractions": memoryExtractions,
  "0034_memory_call_keys": memoryCallKeys,
  "0035_ledger_origins": ledgerOrigins
})
