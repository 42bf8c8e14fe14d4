import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { LIVE, newAccount, serverWith } from "../files/support.js"
import { rejection } from "../openai/support.js"
import { TestServer } from "../support/TestServer.js"
import { clientOf, MANUAL, untilIngested, uploadText } from "./support.js"

/**
 * Issue 32 items 1, 2, 3 and 5 through the official `openai` SDK: knowledge bases as vector stores (create, list,
 * retrieve, update, delete), their files with ingestion status, search with citations, filters, caps, a malformed
 * file failing alone, and partitions (another account, another end user: 404).
 */
describe("knowledge: vector stores", () => {
  layer(serverWith({ KNOWLEDGE_STORE_MAX_FILES: "3", KNOWLEDGE_INGEST_POLL: "1 second" }), LIVE)((it) => {
    it.effect("a store ingests a manual and finds its passages with citations", () =>
      Effect.gen(function*() {
        const account = yield* newAccount
        const caller = account.asEndUser("u1")
        const client = yield* clientOf(account.key, "u1")
        const file = yield* uploadText(caller, MANUAL)
        const store = yield* Effect.promise(() => client.vectorStores.create({ name: "Kettle", file_ids: [file.id], metadata: { product: "kettle" } }))
        assert.match(store.id, /^vs_/)
        assert.strictEqual(store.object, "vector_store")
        assert.strictEqual(store.name, "Kettle")
        assert.deepStrictEqual(store.metadata, { product: "kettle" })
        assert.strictEqual(store.file_counts.total, 1)

        const ingested = yield* untilIngested(client, store.id, file.id)
        assert.strictEqual(ingested.status, "completed", JSON.stringify(ingested.last_error))
        assert.isAbove(ingested.usage_bytes, 0)
        assert.strictEqual((ingested as any).progress.chunks_done, (ingested as any).progress.chunks_total)

        const retrieved = yield* Effect.promise(() => client.vectorStores.retrieve(store.id))
        assert.strictEqual(retrieved.file_counts.completed, 1)
        assert.strictEqual(retrieved.status, "completed")

        const found = yield* Effect.promise(() => client.vectorStores.search(store.id, { query: "How long is the warranty?" }))
        const results = [] as Array<any>
        for (const result of found.data) results.push(result)
        assert.isAbove(results.length, 0)
        const top = results[0]
        assert.strictEqual(top.file_id, file.id)
        assert.strictEqual(top.filename, "manual.md")
        assert.include(top.content[0].text, "two years")
        assert.strictEqual(MANUAL.slice(top.start_char, top.end_char), top.content[0].text, "the citation's range is the passage")
        assert.include(top.heading, "Warranty")
        assert.isAtMost(top.score, 1)
        assert.isAbove(top.score, 0)

        // Stemming follows the store's language: "descaled" finds "Descale".
        const stemmed = yield* Effect.promise(() => client.vectorStores.search(store.id, { query: "descaled" }))
        assert.include(stemmed.data[0]!.content[0]!.text, "citric acid")

        const listed = yield* Effect.promise(() => client.vectorStores.list())
        assert.deepStrictEqual(listed.data.map((s) => s.id), [store.id])
        const files = yield* Effect.promise(() => client.vectorStores.files.list(store.id))
        assert.deepStrictEqual(files.data.map((f) => f.id), [file.id])

        const renamed = yield* Effect.promise(() => client.vectorStores.update(store.id, { name: "Kettle v2" }))
        assert.strictEqual(renamed.name, "Kettle v2")

        // Adding it again unchanged changes nothing; with new attributes it is ingested again, its old chunks replaced.
        const same = yield* Effect.promise(() => client.vectorStores.files.create(store.id, { file_id: file.id }))
        assert.strictEqual(same.status, "completed")
        const again = yield* Effect.promise(() => client.vectorStores.files.create(store.id, { file_id: file.id, attributes: { edition: 2 } }))
        assert.strictEqual(again.status, "in_progress")
        assert.strictEqual((yield* untilIngested(client, store.id, file.id)).status, "completed")
        const server = yield* TestServer
        const generations = yield* server.query(`SELECT DISTINCT generation FROM knowledge_chunks WHERE store_id = '${store.id}'`)
        assert.deepStrictEqual(generations.map((row) => row.generation), [2], "only the new generation's chunks are left")
        const reindexed = yield* Effect.promise(() => client.vectorStores.search(store.id, { query: "warranty", filters: { type: "eq", key: "edition", value: 2 } }))
        assert.include(reindexed.data[0]!.content[0]!.text, "two years")

        // Removing the file removes its chunks: nothing is found any more.
        const removed = yield* Effect.promise(() => client.vectorStores.files.delete(file.id, { vector_store_id: store.id }))
        assert.isTrue(removed.deleted)
        const after = yield* Effect.promise(() => client.vectorStores.search(store.id, { query: "warranty" }))
        assert.strictEqual(after.data.length, 0)

        const deleted = yield* Effect.promise(() => client.vectorStores.delete(store.id))
        assert.deepStrictEqual(deleted, { id: store.id, object: "vector_store.deleted", deleted: true } as any)
        const gone = yield* rejection(() => client.vectorStores.retrieve(store.id))
        assert.strictEqual((gone as any).status, 404)
      }))

    it.effect("a malformed file fails alone with its reason; the others are ingested", () =>
      Effect.gen(function*() {
        const account = yield* newAccount
        const caller = account.asEndUser("u1")
        const client = yield* clientOf(account.key, "u1")
        const good = yield* uploadText(caller, MANUAL)
        const bad = yield* uploadText(caller, "{\"price\": 12, \"name\": ", "broken.json", "application/json")
        const csv = yield* uploadText(caller, "sku,name,price\nK-1,Kettle,39\nT-2,Toaster,25\n", "prices.csv", "text/csv")
        const store = yield* Effect.promise(() => client.vectorStores.create({ name: "Mixed" }))
        for (const id of [good.id, bad.id, csv.id]) {
          yield* Effect.promise(() => client.vectorStores.files.create(store.id, { file_id: id, attributes: { kind: id === csv.id ? "table" : "doc" } }))
        }
        const failed = yield* untilIngested(client, store.id, bad.id)
        assert.strictEqual(failed.status, "failed")
        assert.strictEqual(failed.last_error?.code, "invalid_file")
        assert.include(failed.last_error?.message, "Malformed JSON")
        assert.strictEqual((yield* untilIngested(client, store.id, good.id)).status, "completed")
        assert.strictEqual((yield* untilIngested(client, store.id, csv.id)).status, "completed")

        // A CSV row is found with its column names; attribute filters and file filters narrow a search.
        const toaster = yield* Effect.promise(() => client.vectorStores.search(store.id, { query: "toaster price" }))
        assert.include(toaster.data[0]!.content[0]!.text, "name: Toaster; price: 25")
        const onlyDocs = yield* Effect.promise(() =>
          client.vectorStores.search(store.id, { query: "toaster kettle", filters: { type: "eq", key: "kind", value: "doc" } }))
        assert.isAbove(onlyDocs.data.length, 0)
        assert.isTrue(onlyDocs.data.every((r) => r.file_id === good.id))
        const failedOnly = yield* Effect.promise(() => client.vectorStores.files.list(store.id, { filter: "failed" }))
        assert.deepStrictEqual(failedOnly.data.map((f) => f.id), [bad.id])

        // The store holds at most 3 files (KNOWLEDGE_STORE_MAX_FILES in this test).
        const fourth = yield* uploadText(caller, "one more", "more.txt", "text/plain")
        const refused = yield* rejection(() => client.vectorStores.files.create(store.id, { file_id: fourth.id }))
        assert.strictEqual((refused as any).status, 400)
        assert.include((refused as any).error.message, "at most 3 files")
      }))

    it.effect("another account and another end user get 404", () =>
      Effect.gen(function*() {
        const owner = yield* newAccount
        const client = yield* clientOf(owner.key, "u1")
        const file = yield* uploadText(owner.asEndUser("u1"), MANUAL)
        const store = yield* Effect.promise(() => client.vectorStores.create({ name: "Private", file_ids: [file.id] }))
        yield* untilIngested(client, store.id, file.id)

        const stranger = yield* newAccount
        const other = yield* clientOf(stranger.key, "u1")
        for (const attempt of <Array<() => Promise<unknown>>> [
          // An id of another kind in the path is an unknown store, not a bad request.
          () => client.vectorStores.retrieve(file.id),
          () => other.vectorStores.retrieve(store.id),
          () => other.vectorStores.search(store.id, { query: "warranty" }),
          () => other.vectorStores.files.list(store.id),
          () => other.vectorStores.files.retrieve(file.id, { vector_store_id: store.id }),
          () => other.vectorStores.delete(store.id)
        ]) {
          const error = yield* rejection(attempt)
          assert.strictEqual((error as any).status, 404)
          assert.strictEqual((error as any).error.type, "not_found")
        }
        // The same account acting for another end user does not see it either, nor may it add the owner's file.
        const sibling = yield* clientOf(owner.key, "u2")
        assert.strictEqual(((yield* rejection(() => sibling.vectorStores.retrieve(store.id))) as any).status, 404)
        assert.deepStrictEqual((yield* Effect.promise(() => sibling.vectorStores.list())).data, [])
        const own = yield* Effect.promise(() => sibling.vectorStores.create({ name: "Mine" }))
        const borrowed = yield* rejection(() => sibling.vectorStores.files.create(own.id, { file_id: file.id }))
        assert.strictEqual((borrowed as any).status, 400)
        // Still there for its owner.
        assert.strictEqual((yield* Effect.promise(() => client.vectorStores.retrieve(store.id))).id, store.id)
      }))
  })
})
