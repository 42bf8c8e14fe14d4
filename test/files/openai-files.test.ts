import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI, { toFile } from "openai"
import { TestServer } from "../support/TestServer.js"
import { LIVE, newAccount, serverWith } from "./support.js"

/**
 * Issue 44 gap 5: OpenAI's `files.list` and `files.content` through the official `openai` SDK. Files are the
 * caller's partition's (account and end user): another's file is a 404 for both, and its bytes never leak.
 */

const clientOf = (key: string, endUser: string) =>
  Effect.map(TestServer, (server) =>
    new OpenAI({ baseURL: `${server.url}/v1`, apiKey: key, maxRetries: 0, defaultHeaders: { "X-End-User-Id": endUser } }))

const uploadVia = (client: OpenAI, name: string, text: string, type: string) =>
  Effect.promise(async () => client.files.create({ file: await toFile(Buffer.from(text), name, { type }), purpose: "assistants" }))

/** Every file of the SDK's auto-paging list (it follows `has_more` with `after`). */
const listAll = (client: OpenAI, limit: number) =>
  Effect.promise(async () => {
    const ids: Array<string> = []
    let pages = 0
    let page = await client.files.list({ limit })
    for (;;) {
      pages++
      ids.push(...page.data.map((file) => file.id))
      if (!page.hasNextPage()) break
      page = await page.getNextPage()
    }
    return { ids, pages }
  })

/** The SDK's error for a call expected to fail (its status and raw body text). */
const failure = (run: () => Promise<unknown>) =>
  Effect.promise(async () => {
    try {
      await run()
    } catch (error) {
      if (error instanceof OpenAI.APIError) return { status: error.status, text: JSON.stringify(error.error) + error.message }
      throw error
    }
    throw new Error("expected the call to fail")
  })

describe("files: openai files.list and files.content (issue 44 gap 5)", () => {
  layer(serverWith(), LIVE)((it) => {
    it.effect("lists the caller's own files in OpenAI's shape, paged; content streams the bytes with their type", () =>
      Effect.gen(function*() {
        const account = yield* newAccount
        const alice = yield* clientOf(account.key, "alice")
        const secret = `alice-secret-${Math.random().toString(36).slice(2)}`
        const notes = yield* uploadVia(alice, "notes.md", `# Notes\n${secret}\n`, "text/markdown")
        const data = yield* uploadVia(alice, "data.csv", `name,secret\nalice,${secret}\n`, "text/csv")
        const third = yield* uploadVia(alice, "third.txt", "three", "text/plain")

        const first = yield* Effect.promise(() => alice.files.list())
        assert.deepStrictEqual(first.data.map((file) => file.id), [third.id, data.id, notes.id], "newest first")
        const listed = first.data.find((file) => file.id === notes.id)!
        assert.strictEqual(listed.object, "file")
        assert.strictEqual(listed.filename, "notes.md")
        assert.strictEqual(listed.bytes, Buffer.byteLength(`# Notes\n${secret}\n`))
        assert.strictEqual(listed.status, "processed")
        assert.isNumber(listed.created_at)
        // Paged through `after` by the SDK itself: 2 + 1.
        const paged = yield* listAll(alice, 2)
        assert.deepStrictEqual(paged, { ids: [third.id, data.id, notes.id], pages: 2 })

        const content = yield* Effect.promise(() => alice.files.content(notes.id))
        assert.strictEqual(content.status, 200)
        assert.match(content.headers.get("content-type") ?? "", /^text\/markdown/)
        assert.strictEqual(yield* Effect.promise(() => content.text()), `# Notes\n${secret}\n`)
        const csv = yield* Effect.promise(() => alice.files.content(data.id))
        assert.match(csv.headers.get("content-type") ?? "", /^text\/csv/)
        assert.strictEqual(yield* Effect.promise(() => csv.text()), `name,secret\nalice,${secret}\n`)
      }))

    it.effect("another end user's or another account's file is a 404 for list and content, and its bytes never leak", () =>
      Effect.gen(function*() {
        const account = yield* newAccount
        const other = yield* newAccount
        const alice = yield* clientOf(account.key, "alice")
        const bob = yield* clientOf(account.key, "bob")
        const mallory = yield* clientOf(other.key, "alice")
        const secret = `never-leak-${Math.random().toString(36).slice(2)}`
        const file = yield* uploadVia(alice, "private.txt", secret, "text/plain")

        for (const [who, client] of [["another end user", bob], ["another account, same end user id", mallory]] as const) {
          const listed = yield* Effect.promise(() => client.files.list())
          assert.deepStrictEqual(listed.data, [], who)
          const refused = yield* failure(() => client.files.content(file.id).then((response) => response.text()))
          assert.strictEqual(refused.status, 404, who)
          assert.notInclude(refused.text, secret, who)
          // `after` names a file outside the partition: 404, not a page of it.
          const after = yield* failure(() => client.files.list({ after: file.id }))
          assert.strictEqual(after.status, 404, who)
          // The raw answer too: an error body, without the bytes.
          const server = yield* TestServer
          const raw = yield* Effect.promise(() =>
            fetch(`${server.url}/v1/files/${file.id}/content`, {
              headers: { authorization: `Bearer ${client.apiKey}`, "x-end-user-id": client === bob ? "bob" : "alice" }
            }).then(async (response) => ({ status: response.status, text: await response.text() }))
          )
          assert.strictEqual(raw.status, 404, who)
          assert.notInclude(raw.text, secret, who)
          assert.strictEqual(JSON.parse(raw.text).error.type, "not_found", raw.text)
        }
        // Alice still reads it.
        const own = yield* Effect.promise(() => alice.files.content(file.id).then((response) => response.text()))
        assert.strictEqual(own, secret)
        const missing = yield* failure(() => alice.files.content("file_none"))
        assert.strictEqual(missing.status, 404)
      }))
  })
})
