import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { newAccount, serverWith } from "../files/support.js"
import { servicesMode, TestServer } from "../support/TestServer.js"
import { clientOf, DIMENSIONS, makeFakeEmbeddings, MANUAL, untilIngested, uploadText } from "./support.js"

/**
 * Issue 32 item 2 and 3 with an embedding provider (a stand-in OpenAI-compatible upstream over real HTTP):
 * chunks are embedded at ingestion and billed per 1k tokens to the store's owner; a search is hybrid, so a
 * synonym full-text search cannot match ("guarantee" for "warranty") still finds the passage. Where the database
 * has no `vector` extension (a PostgreSQL without pgvector), the same provider leaves search full-text.
 */
describe("knowledge: hybrid retrieval", () => {
  it.scopedLive("embeddings at ingestion, billed; hybrid search finds what full-text cannot", () =>
    Effect.gen(function*() {
      const upstream = yield* makeFakeEmbeddings
      const context = yield* Layer.build(serverWith({
        EMBEDDINGS_BASE_URL: upstream.url,
        EMBEDDINGS_MODEL: "fake-embed",
        EMBEDDINGS_API_KEY: "sk-upstream-secret",
        EMBEDDINGS_PRICE_PER_1K: "1",
        KNOWLEDGE_INGEST_POLL: "1 second"
      }))
      yield* Effect.gen(function*() {
        const server = yield* TestServer
        const vectors = (yield* server.query("SELECT 1 FROM information_schema.columns WHERE table_name = 'knowledge_chunks' AND column_name = 'embedding'")).length > 0
        if (!servicesMode) assert.isTrue(vectors, "PGlite ships the vector extension")

        const account = yield* newAccount
        const client = yield* clientOf(account.key, "u1")
        const file = yield* uploadText(account.asEndUser("u1"), MANUAL)
        const store = yield* Effect.promise(() => client.vectorStores.create({ name: "Hybrid", file_ids: [file.id] }))
        const ingested = yield* untilIngested(client, store.id, file.id)
        assert.strictEqual(ingested.status, "completed", JSON.stringify(ingested.last_error))

        // The SDK's page keeps the whole answer in `body`, where our `ranker` is.
        const guarantee = yield* Effect.promise(() => client.vectorStores.search(store.id, { query: "guarantee" }))
        if (!vectors) {
          // No vectors here: full-text only, which knows no "guarantee".
          assert.strictEqual((guarantee as any).body.ranker, "full_text")
          assert.strictEqual(guarantee.data.length, 0)
          return
        }
        assert.isAbove(upstream.requests.length, 0)
        assert.strictEqual(upstream.requests[0]!.model, "fake-embed")
        assert.strictEqual(upstream.requests[0]!.authorization, "Bearer sk-upstream-secret")
        const rows = yield* server.query(`SELECT count(*)::int AS n, count(embedding)::int AS embedded, min(embedding_dims) AS dims FROM knowledge_chunks WHERE store_id = '${store.id}'`)
        assert.strictEqual(rows[0]!.n, rows[0]!.embedded, "every chunk has its embedding")
        assert.strictEqual(rows[0]!.dims, DIMENSIONS)

        assert.strictEqual((guarantee as any).body.ranker, "hybrid")
        assert.include(guarantee.data[0]!.content[0]!.text, "two years", "the vector side found the warranty")
        // Both sides agree on "descale": it is first, at the top score.
        const descale = yield* Effect.promise(() => client.vectorStores.search(store.id, { query: "descale" }))
        assert.include(descale.data[0]!.content[0]!.text, "citric acid")
        assert.strictEqual(descale.data[0]!.score, 1)
        // A threshold keeps only the passages ranked well by both.
        const strict = yield* Effect.promise(() =>
          client.vectorStores.search(store.id, { query: "descale", ranking_options: { score_threshold: 0.99 } }))
        assert.strictEqual(strict.data.length, 1)

        // The embedding was billed per 1k tokens to the owner: one charge per ingestion step, and the queries.
        const owner = (yield* server.query(`SELECT owner_id FROM vector_stores WHERE id = '${store.id}'`))[0]!.owner_id
        const charges = yield* server.query(`SELECT idempotency_key, amount::text AS amount FROM ledger_entries WHERE user_id = '${owner}' AND scope = 'knowledge'`)
        assert.isTrue(charges.some((c) => String(c.idempotency_key).startsWith(`kb:${store.id}:${file.id}:1:`)), JSON.stringify(charges))
        assert.isTrue(charges.every((c) => BigInt(String(c.amount)) < 0n))
      }).pipe(Effect.provide(context))
    }), { timeout: 120_000 })
})
