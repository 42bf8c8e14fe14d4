import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Option, Schema } from "effect"
import { AgentId, UserId } from "../platform/Ids.js"
import { RunId } from "../runtime/Domain.js"
import { FactId } from "../runtime/Domain.js"

/** Whose memory: the expert and the end user's partition (account + end user id). */
const Owner = Schema.Struct({ agentId: Schema.String, accountId: UserId, endUserId: Schema.String })
export type MemoryKey = typeof Owner.Type

export const BlockRow = Schema.Struct({
  label: Schema.String,
  value: Schema.String,
  version: Schema.Number,
  updatedAt: Schema.DateFromSelf
})
export type BlockRow = typeof BlockRow.Type

export const BlockVersionRow = Schema.Struct({
  label: Schema.String,
  version: Schema.Number,
  value: Schema.String,
  writtenBy: Schema.String,
  createdAt: Schema.DateFromSelf
})
export type BlockVersionRow = typeof BlockVersionRow.Type

export const FactRow = Schema.Struct({
  id: FactId,
  text: Schema.String,
  validFrom: Schema.DateFromSelf,
  supersededAt: Schema.NullOr(Schema.DateFromSelf),
  supersededBy: Schema.NullOr(FactId),
  source: Schema.String
})
export type FactRow = typeof FactRow.Type

const FACT_COLUMNS = "id, text, valid_from, superseded_at, superseded_by, source"

/** Versions kept of each block: every change keeps the value it replaced, up to this many. */
export const KEPT_VERSIONS = 100

/** Memory blocks, their versions and facts (docs/memory.md). SQL errors are defects here. */
export class MemoryRepo extends Effect.Service<MemoryRepo>()("atrium/memory/MemoryRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // The statement gets the request encoded (its ids plain strings).
    const owned = (key: typeof Owner.Encoded) =>
      sql`agent_id = ${key.agentId} AND account_id = ${key.accountId} AND end_user_id = ${key.endUserId}`

    const blocks = SqlSchema.findAll({
      Request: Owner,
      Result: BlockRow,
      execute: (key) => sql`SELECT label, value, version, updated_at FROM memory_blocks WHERE ${owned(key)} ORDER BY label`
    })

    /**
     * Writes a block's next value if it is still at `expected` (0: never written), and keeps the value as a version.
     * None when another write came first: the caller reads again and decides again (its limit check included).
     */
    const write = SqlSchema.findOne({
      Request: Schema.Struct({
        ...Owner.fields,
        label: Schema.String,
        expected: Schema.Number,
        value: Schema.String,
        writtenBy: Schema.String,
        // The model's tool call that wrote it (its idempotency key), kept on the version.
        call: Schema.NullOr(Schema.String)
      }),
      Result: Schema.Struct({ version: Schema.Number, updatedAt: Schema.DateFromSelf }),
      execute: (w) =>
        w.expected === 0
          ? sql`
            WITH written AS (
              INSERT INTO memory_blocks (agent_id, account_id, end_user_id, label, value, version)
              VALUES (${w.agentId}, ${w.accountId}, ${w.endUserId}, ${w.label}, ${w.value}, 1)
              ON CONFLICT DO NOTHING
              RETURNING version, updated_at
            ), kept AS (
              INSERT INTO memory_block_versions (agent_id, account_id, end_user_id, label, version, value, written_by, call_key)
              SELECT ${w.agentId}, ${w.accountId}, ${w.endUserId}, ${w.label}, version, ${w.value}, ${w.writtenBy}, ${w.call} FROM written
            )
            SELECT version, updated_at FROM written`
          : sql`
            WITH written AS (
              UPDATE memory_blocks SET value = ${w.value}, version = version + 1, updated_at = now()
              WHERE ${owned(w)} AND label = ${w.label} AND version = ${w.expected}
              RETURNING version, updated_at
            ), kept AS (
              INSERT INTO memory_block_versions (agent_id, account_id, end_user_id, label, version, value, written_by, call_key)
              SELECT ${w.agentId}, ${w.accountId}, ${w.endUserId}, ${w.label}, version, ${w.value}, ${w.writtenBy}, ${w.call} FROM written
            ), pruned AS (
              DELETE FROM memory_block_versions
              WHERE ${owned(w)} AND label = ${w.label} AND version <= ${w.expected + 1 - KEPT_VERSIONS}
            )
            SELECT version, updated_at FROM written`
    })

    /** Whether the tool call `call` wrote a version of the block still kept (a repeat of that call finds it). */
    const writtenByCall = SqlSchema.findOne({
      Request: Schema.Struct({ ...Owner.fields, label: Schema.String, call: Schema.String }),
      Result: Schema.Struct({ version: Schema.Number }),
      execute: (w) =>
        sql`
          SELECT version FROM memory_block_versions
          WHERE ${owned(w)} AND label = ${w.label} AND call_key = ${w.call} LIMIT 1`
    })

    const versions = SqlSchema.findAll({
      Request: Owner,
      Result: BlockVersionRow,
      execute: (key) =>
        sql`
          SELECT label, version, value, written_by, created_at FROM memory_block_versions
          WHERE ${owned(key)} ORDER BY label, version`
    })

    /** None when the id is taken: a keyed fact written by another try of the same call (its id is the call's). */
    const insertFact = SqlSchema.findOne({
      Request: Schema.Struct({ ...Owner.fields, id: FactId, text: Schema.String, source: Schema.String }),
      Result: FactRow,
      execute: (f) =>
        sql`
          INSERT INTO memory_facts (id, agent_id, account_id, end_user_id, text, source)
          VALUES (${f.id}, ${f.agentId}, ${f.accountId}, ${f.endUserId}, ${f.text}, ${f.source})
          ON CONFLICT (id) DO NOTHING
          RETURNING ${sql.literal(FACT_COLUMNS)}`
    })

    /** The newer fact in one statement with the old one's end: a fact superseded once, by one fact. */
    const supersede = SqlSchema.findOne({
      Request: Schema.Struct({ ...Owner.fields, old: FactId, id: FactId, text: Schema.String, source: Schema.String }),
      Result: FactRow,
      execute: (f) =>
        sql`
          WITH ended AS (
            UPDATE memory_facts SET superseded_at = now(), superseded_by = ${f.id}
            WHERE ${owned(f)} AND id = ${f.old} AND superseded_at IS NULL
            RETURNING id
          )
          INSERT INTO memory_facts (id, agent_id, account_id, end_user_id, text, source)
          SELECT ${f.id}, ${f.agentId}, ${f.accountId}, ${f.endUserId}, ${f.text}, ${f.source} FROM ended
          RETURNING ${sql.literal(FACT_COLUMNS)}`
    })

    const fact = SqlSchema.findOne({
      Request: Schema.Struct({ ...Owner.fields, id: FactId }),
      Result: FactRow,
      execute: (f) => sql`SELECT ${sql.literal(FACT_COLUMNS)} FROM memory_facts WHERE ${owned(f)} AND id = ${f.id}`
    })

    const facts = SqlSchema.findAll({
      Request: Schema.Struct({ ...Owner.fields, current: Schema.Boolean, limit: Schema.Number }),
      Result: FactRow,
      execute: (f) =>
        sql`
          SELECT ${sql.literal(FACT_COLUMNS)} FROM memory_facts
          WHERE ${owned(f)} ${f.current ? sql`AND superseded_at IS NULL` : sql``}
          ORDER BY valid_from DESC, id DESC LIMIT ${f.limit}`
    })

    const countCurrent = SqlSchema.single({
      Request: Owner,
      Result: Schema.Struct({ count: Schema.NumberFromString }),
      execute: (key) => sql`SELECT count(*)::text AS count FROM memory_facts WHERE ${owned(key)} AND superseded_at IS NULL`
    })

    /** Current facts holding every word of the query (PostgreSQL full text, the `simple` configuration), best first. */
    const search = SqlSchema.findAll({
      Request: Schema.Struct({ ...Owner.fields, query: Schema.String, limit: Schema.Number }),
      Result: FactRow,
      execute: (f) =>
        sql`
          SELECT ${sql.literal(FACT_COLUMNS)} FROM memory_facts
          WHERE ${owned(f)} AND superseded_at IS NULL AND search @@ plainto_tsquery('simple', ${f.query})
          ORDER BY ts_rank(search, plainto_tsquery('simple', ${f.query})) DESC, valid_from DESC, id DESC
          LIMIT ${f.limit}`
    })

    const removeFact = SqlSchema.findAll({
      Request: Schema.Struct({ ...Owner.fields, id: FactId }),
      Result: Schema.Struct({ id: FactId }),
      execute: (f) => sql`DELETE FROM memory_facts WHERE ${owned(f)} AND id = ${f.id} RETURNING id`
    })

    const removeAll = (key: MemoryKey) =>
      sql.withTransaction(Effect.gen(function*() {
        const blocks = yield* sql<{ label: string }>`DELETE FROM memory_blocks WHERE ${owned(key)} RETURNING label`
        const facts = yield* sql<{ id: string }>`DELETE FROM memory_facts WHERE ${owned(key)} RETURNING id`
        // Turns still waiting for extraction would write facts again after the end user deleted everything.
        yield* sql`DELETE FROM memory_extraction_turns WHERE ${owned(key)}`
        return { blocks: blocks.length, facts: facts.length }
      }))

    /** What the expert's creator may see: how many end users it remembers, and how much, never what. */
    const usage = SqlSchema.single({
      Request: Schema.Struct({ agentId: AgentId }),
      Result: Schema.Struct({ endUsers: Schema.NumberFromString, facts: Schema.NumberFromString, blocks: Schema.NumberFromString }),
      execute: ({ agentId }) =>
        sql`
          SELECT
            (SELECT count(*) FROM (
              SELECT account_id, end_user_id FROM memory_facts WHERE agent_id = ${agentId}
              UNION SELECT account_id, end_user_id FROM memory_blocks WHERE agent_id = ${agentId}) AS owners)::text AS end_users,
            (SELECT count(*) FROM memory_facts WHERE agent_id = ${agentId} AND superseded_at IS NULL)::text AS facts,
            (SELECT count(*) FROM memory_blocks WHERE agent_id = ${agentId})::text AS blocks`
    })

    return {
      blocks: (key: MemoryKey) => Effect.orDie(blocks(key)),
      write: (w: Parameters<typeof write>[0]) => Effect.orDie(write(w)),
      writtenByCall: (key: MemoryKey, label: string, call: string) =>
        Effect.map(Effect.orDie(writtenByCall({ ...key, label, call })), Option.isSome),
      versions: (key: MemoryKey) => Effect.orDie(versions(key)),
      insertFact: (f: Parameters<typeof insertFact>[0]) => Effect.orDie(insertFact(f)),
      supersede: (f: Parameters<typeof supersede>[0]) => Effect.orDie(supersede(f)),
      fact: (key: MemoryKey, id: FactId) => Effect.orDie(fact({ ...key, id })),
      facts: (key: MemoryKey, current: boolean, limit: number) => Effect.orDie(facts({ ...key, current, limit })),
      countCurrent: (key: MemoryKey) => Effect.map(Effect.orDie(countCurrent(key)), (row) => row.count),
      search: (key: MemoryKey, query: string, limit: number) => Effect.orDie(search({ ...key, query, limit })),
      removeFact: (key: MemoryKey, id: FactId) => Effect.map(Effect.orDie(removeFact({ ...key, id })), (rows) => rows.length > 0),
      removeAll: (key: MemoryKey) => Effect.orDie(removeAll(key)),
      usage: (agentId: AgentId) => Effect.orDie(usage({ agentId }))
    } as const
  })
}) {}

/** A finished turn waiting for extraction (`memory_extraction_turns`), as extraction reads it. */
export const ExtractionTurnRow = Schema.Struct({
  runId: RunId,
  agentId: Schema.String,
  accountId: UserId,
  endUserId: Schema.String,
  agent: Schema.String,
  models: Schema.Unknown,
  settings: Schema.Unknown,
  message: Schema.String,
  answer: Schema.String,
  extractionId: Schema.NullOr(RunId)
})
export type ExtractionTurnRow = typeof ExtractionTurnRow.Type

const TURN_COLUMNS = "run_id, agent_id, account_id, end_user_id, agent, models, settings, message, answer, extraction_id"
const parsed = (value: unknown) => (typeof value === "string" ? JSON.parse(value) : value)
const parsedTurn = (row: ExtractionTurnRow): ExtractionTurnRow => ({ ...row, models: parsed(row.models), settings: parsed(row.settings) })

/**
 * The turns waiting for extraction (docs/memory.md "Extraction"): written by the turn, claimed by the extraction
 * that reads them, deleted once it wrote what it proposed. SQL errors are defects here.
 */
export class ExtractionTurnsRepo extends Effect.Service<ExtractionTurnsRepo>()("atrium/memory/ExtractionTurnsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const insert = (turn: Omit<ExtractionTurnRow, "models" | "settings" | "extractionId"> & { models: ReadonlyArray<string>; settings: unknown }) =>
      sql`
        INSERT INTO memory_extraction_turns (run_id, agent_id, account_id, end_user_id, agent, models, settings, message, answer)
        VALUES (${turn.runId}, ${turn.agentId}, ${turn.accountId}, ${turn.endUserId}, ${turn.agent},
                ${JSON.stringify(turn.models)}::jsonb, ${JSON.stringify(turn.settings)}::jsonb, ${turn.message}, ${turn.answer})
        ON CONFLICT (run_id) DO NOTHING`

    const byRun = SqlSchema.findOne({
      Request: RunId,
      Result: ExtractionTurnRow,
      execute: (runId) => sql`SELECT ${sql.literal(TURN_COLUMNS)} FROM memory_extraction_turns WHERE run_id = ${runId}`
    })

    const Claim = Schema.Struct({ id: RunId, agentId: Schema.String, accountId: UserId, endUserId: Schema.String })
    const ClaimedRow = Schema.Struct({ ...ExtractionTurnRow.fields, createdAt: Schema.DateFromSelf })
    const ownerRows = SqlSchema.findAll({
      Request: Claim,
      Result: ClaimedRow,
      // Locked: two extractions of one owner claiming at once take turns, and the second sees the first's claim.
      execute: (c) =>
        sql`
          SELECT ${sql.literal(TURN_COLUMNS)}, created_at FROM memory_extraction_turns
          WHERE agent_id = ${c.agentId} AND account_id = ${c.accountId} AND end_user_id = ${c.endUserId}
          FOR UPDATE`
    })

    /**
     * Takes for extraction `id` every turn of the owner no extraction took yet, and those it took before (an
     * extraction executed again after a fault reads the same turns), oldest first; `busy` (and nothing taken) while
     * another extraction of the same owner holds turns: one owner's extractions run one after the other, so the
     * later one reads what the earlier one wrote.
     */
    const claim = (c: typeof Claim.Type) =>
      sql.withTransaction(Effect.gen(function*() {
        const rows = yield* ownerRows(c)
        if (rows.some((row) => row.extractionId !== null && row.extractionId !== c.id)) return { busy: true, turns: [] }
        const mine = rows.filter((row) => row.extractionId === null || row.extractionId === c.id)
        const fresh = mine.filter((row) => row.extractionId === null).map((row) => row.runId)
        if (fresh.length > 0) yield* sql`UPDATE memory_extraction_turns SET extraction_id = ${c.id} WHERE run_id IN ${sql.in(fresh)}`
        const turns = [...mine].sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || a.runId.localeCompare(b.runId))
        return { busy: false, turns: turns.map((row) => parsedTurn({ ...row, extractionId: c.id })) }
      }))

    return {
      insert: (turn: Parameters<typeof insert>[0]) => Effect.asVoid(Effect.orDie(insert(turn))),
      byRun: (runId: RunId) => Effect.map(Effect.orDie(byRun(runId)), (row) => row.pipe(Option.map(parsedTurn))),
      claim: (c: typeof Claim.Type) => Effect.orDie(claim(c)),
      /** The turns extraction `id` read, once what it proposed is written. */
      done: (id: RunId) => Effect.asVoid(Effect.orDie(sql`DELETE FROM memory_extraction_turns WHERE extraction_id = ${id}`))
    } as const
  })
}) {}
