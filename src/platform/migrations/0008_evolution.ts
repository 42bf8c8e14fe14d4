import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Self-evolution and distillation (spec 4.10, the MCP issue).
 *
 * `evolution_suggestions`: improvements derived from an agent's recorded runs. At most one open (`pending`)
 * suggestion per agent, kind and subject (a failure code, a tool name), so deriving them again updates the open one
 * in place and its id stays stable. `evidence` holds the counts it was derived from; `applied_version` is the
 * version an accepted suggestion published without review (spec 4.10 rule 9), null when the agent had none published.
 *
 * `distillations`: a distillation conversation of one account with the platform's distiller: the materials it read,
 * the agent it drafts, the transcript, and the agent it created once asked to. `busy_until` is set while a message
 * is being answered, so two messages of one conversation are never answered at once (it expires, so a crashed
 * process does not lock the conversation for ever).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE evolution_suggestions (
      id text PRIMARY KEY,
      agent_id text NOT NULL REFERENCES agents (id),
      kind text NOT NULL,
      subject text NOT NULL DEFAULT '',
      title text NOT NULL,
      rationale text NOT NULL,
      change jsonb NOT NULL,
      evidence jsonb NOT NULL DEFAULT '{}'::jsonb,
      drafted_by text NOT NULL DEFAULT 'template',
      status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'accepted', 'dismissed')),
      applied_version integer,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      accepted_at timestamptz,
      dismissed_at timestamptz
    )`
  yield* sql`
    CREATE UNIQUE INDEX evolution_suggestions_one_open ON evolution_suggestions (agent_id, kind, subject)
    WHERE status = 'pending'`
  yield* sql`CREATE INDEX evolution_suggestions_agent ON evolution_suggestions (agent_id, created_at)`
  yield* sql`
    CREATE TABLE distillations (
      id text PRIMARY KEY,
      owner_id text NOT NULL REFERENCES users (id),
      topic text NOT NULL,
      materials jsonb NOT NULL,
      draft jsonb NOT NULL,
      messages jsonb NOT NULL DEFAULT '[]'::jsonb,
      agent_id text REFERENCES agents (id),
      turns integer NOT NULL DEFAULT 0,
      busy_until timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX distillations_owner ON distillations (owner_id, created_at DESC)`
})
