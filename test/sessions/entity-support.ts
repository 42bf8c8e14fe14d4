import { SessionId } from "../../src/platform/Ids.js"
import { ShardingConfig } from "@effect/cluster"
import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { ShardFences } from "../../src/platform/cluster/Fences.js"
import { AppConfig } from "../../src/platform/Config.js"
import { Stopping } from "../../src/platform/Stopping.js"
import { RunnerTurns } from "../../src/sessions/Activation.js"
import { insertUser, TestDatabase } from "../support/Database.js"
import { KnowledgeGate, RunPayerTest } from "../support/Ports.js"

/**
 * What a test of the Session entity in-process (`Entity.makeTestClient`) stands on: the real log and history in the
 * test's own database, the wallet and knowledge search as test ports. A session that goes away does not wait for its
 * turns to end (SHUTDOWN_GRACE): the next activation picks them up.
 */
export const SessionEntityEnv = Layer.mergeAll(
  AppConfig.Default,
  Stopping.Default,
  RunnerTurns.Default,
  ShardingConfig.layer(),
  // No runner storage tells these fences of shards: the entity holds its shard and writes unfenced.
  ShardFences.Default,
  RunPayerTest.layer(),
  KnowledgeGate.layer
).pipe(Layer.provideMerge(TestDatabase({ SHUTDOWN_GRACE: "0 millis" })))

let made = 0

/**
 * A user, their agent (builtin model) and a session of theirs, named after `prefix`. With `searches`, the agent has
 * `file_search` over a knowledge base, whose searches hold in `KnowledgeGate` until a test answers them.
 */
export const newEntitySession = (prefix: string, options: { readonly searches: boolean }) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const n = `${prefix}_${process.pid}_${++made}`
    const userId = `usr_${n}`
    yield* insertUser(userId)
    const draft = {
      name: options.searches ? "Gated" : "Echo",
      description: options.searches ? "Searches its knowledge" : "Says what it heard",
      category: "other",
      instructions: "",
      model: "builtin",
      tools: options.searches ? [{ name: "file_search", permission: "allow" }] : [],
      knowledge_bases: options.searches ? ["vs_gated"] : [],
      subagents: [],
      opening_message: "",
      case_demos: [],
      billing: { type: "FREE", price: "0", free_trial_per_user: 0, allow_trial: false }
    }
    yield* sql`INSERT INTO agents (id, identifier, owner_id, draft) VALUES (${`agt_${n}`}, ${n.replaceAll("_", "-")}, ${userId}, ${JSON.stringify(draft)}::jsonb)`
    const sessionId = SessionId.make(`ses_${n}`)
    yield* sql`INSERT INTO sessions (id, agent_id, account_id, end_user_id) VALUES (${sessionId}, ${`agt_${n}`}, ${userId}, ${userId})`
    return sessionId
  }).pipe(Effect.orDie)
