import { assert, describe, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import memoryMigration from "../../src/platform/migrations/0025_memory.js"
import { insertUser, TestDatabase } from "../support/Database.js"

/**
 * Migration 0025 (issue 47): the notes `memory_save` kept in `agent_memories` become facts of the same expert and
 * end user, valid from when they were saved. Replayed on a database of its own: the memory tables put back to what
 * 0024 left (the notes' table, with notes in it), then 0025 run again.
 */

describe("migration 0025_memory", () => {
  it.layer(TestDatabase(), { timeout: "60 seconds" })((it) => {
    it.effect("existing saved notes become facts; the notes' table is gone", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* insertUser("usr_migrate")
        yield* sql`INSERT INTO agents (id, identifier, owner_id, draft) VALUES ('agt_migrate', 'migrate', 'usr_migrate', '{}'::jsonb)`
        yield* sql`DROP TABLE memory_block_versions`
        yield* sql`DROP TABLE memory_blocks`
        yield* sql`DROP TABLE memory_facts`
        yield* sql`
          CREATE TABLE agent_memories (
            id bigserial PRIMARY KEY,
            agent_id text NOT NULL REFERENCES agents (id),
            account_id text NOT NULL REFERENCES users (id),
            end_user_id text NOT NULL,
            text text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now()
          )`
        yield* sql`
          INSERT INTO agent_memories (agent_id, account_id, end_user_id, text, created_at) VALUES
            ('agt_migrate', 'usr_migrate', 'alice', 'alice likes tea', '2026-01-02T03:04:05Z'),
            ('agt_migrate', 'usr_migrate', '', 'the owner likes coffee', '2026-02-03T04:05:06Z')`
        yield* memoryMigration

        const facts = yield* sql<{ id: string; endUserId: string; text: string; validFrom: Date; supersededAt: Date | null; source: string }>`
          SELECT id, end_user_id, text, valid_from, superseded_at, source FROM memory_facts ORDER BY valid_from`
        assert.deepStrictEqual(
          facts.map((f) => [f.endUserId, f.text, new Date(f.validFrom).toISOString(), f.supersededAt, f.source]),
          [
            ["alice", "alice likes tea", "2026-01-02T03:04:05.000Z", null, "migration"],
            ["", "the owner likes coffee", "2026-02-03T04:05:06.000Z", null, "migration"]
          ]
        )
        assert.isTrue(facts.every((f) => f.id.startsWith("fact_")))
        // Found by the full text search the tools use.
        const found = yield* sql<{ text: string }>`SELECT text FROM memory_facts WHERE search @@ plainto_tsquery('simple', 'TEA alice')`
        assert.deepStrictEqual(found.map((f) => f.text), ["alice likes tea"])
        const left = yield* sql<{ name: string | null }>`SELECT to_regclass('agent_memories')::text AS name`
        assert.isNull(left[0]!.name)
      }).pipe(Effect.orDie))
  })
})
