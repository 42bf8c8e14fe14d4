import { Effect } from "effect"
import OpenAI from "openai"
import { pollUntil } from "../support/Poll.js"
import { TestServer } from "../support/TestServer.js"
import { type Caller, upload } from "../files/support.js"

/** An official `openai` client of `key` acting for `endUser`, on the test server. */
export const clientOf = (key: string, endUser: string) =>
  Effect.map(TestServer, (server) =>
    new OpenAI({ baseURL: `${server.url}/v1`, apiKey: key, maxRetries: 0, defaultHeaders: { "X-End-User-Id": endUser } }))

export const MANUAL = [
  "# Acme Kettle Manual",
  "",
  "Thank you for buying the Acme kettle. Read these instructions before first use.",
  "",
  "## Filling",
  "",
  "Fill the kettle with water up to the MAX line. Never fill it above the line or boiling water may spill.",
  "",
  "## Warranty",
  "",
  "The warranty lasts two years from the date of purchase. It covers defects in materials and workmanship.",
  "It does not cover limescale damage or a dropped kettle.",
  "",
  "## Descaling",
  "",
  "Descale the kettle every month with citric acid. Rinse it three times afterwards."
].join("\n")

/** Uploads `text` (two-step) as a file of `caller`. */
export const uploadText = (caller: Caller, text: string, filename = "manual.md", contentType = "text/markdown") =>
  upload(caller, new TextEncoder().encode(text), { filename, contentType })

/** Polls a store's file until its ingestion ends. */
export const untilIngested = (client: OpenAI, storeId: string, fileId: string) =>
  // Polled: ingestion runs in the background and is seen only through the file's status.
  pollUntil(
    Effect.promise(() => client.vectorStores.files.retrieve(fileId, { vector_store_id: storeId })),
    (file) => file.status !== "in_progress",
    `${fileId} ingested`,
    { every: 50, within: 60_000 }
  )

/**
 * A stand-in OpenAI-compatible `/embeddings` upstream over real HTTP. Its vectors are deterministic: one dimension
 * per group of words that mean the same (so "guarantee" lands next to "warranty", which full-text search cannot
 * see), and a small constant one so that no vector is zero. From request number `holdFrom` on, requests wait until
 * `release()`; it counts the inputs it embedded.
 */
export const CONCEPTS: ReadonlyArray<ReadonlyArray<string>> = [
  ["warranty", "guarantee", "guaranteed", "defects", "workmanship"],
  ["descale", "descaling", "limescale", "citric", "scale"],
  ["fill", "filling", "water", "spill", "line"],
  ["toaster", "bread", "toast"]
]
export const DIMENSIONS = CONCEPTS.length + 1

export const fakeVector = (text: string) => {
  const vector = new Array<number>(DIMENSIONS).fill(0)
  vector[DIMENSIONS - 1] = 0.05
  for (const word of text.toLowerCase().match(/[a-z]+/g) ?? []) {
    const at = CONCEPTS.findIndex((group) => group.includes(word))
    if (at >= 0) vector[at]! += 1
  }
  return vector
}

export interface FakeEmbeddings {
  readonly url: string
  readonly requests: Array<{ readonly model: string; readonly inputs: ReadonlyArray<string>; readonly authorization: string | undefined }>
  /** Requests waiting for `release()`. */
  readonly waiting: () => number
  holdFrom: number
  readonly release: () => void
}

export const makeFakeEmbeddings = Effect.gen(function*() {
  const Http = yield* Effect.promise(() => import("node:http"))
  let waiters: Array<() => void> = []
  const state: FakeEmbeddings = {
    url: "",
    requests: [],
    waiting: () => waiters.length,
    holdFrom: Number.POSITIVE_INFINITY,
    release: () => {
      state.holdFrom = Number.POSITIVE_INFINITY
      const ready = waiters
      waiters = []
      for (const go of ready) go()
    }
  }
  const server = Http.createServer((req, res) => {
    let body = ""
    req.on("data", (chunk) => (body += chunk))
    req.on("end", () => {
      const parsed = JSON.parse(body) as { model: string; input: Array<string> }
      const answer = () => {
        if (res.destroyed) return
        state.requests.push({ model: parsed.model, inputs: parsed.input, authorization: req.headers.authorization })
        const data = parsed.input.map((input, index) => ({ object: "embedding", index, embedding: fakeVector(input) }))
        const tokens = parsed.input.reduce((sum, input) => sum + Math.ceil(input.length / 4), 0)
        res.writeHead(200, { "content-type": "application/json" })
          .end(JSON.stringify({ object: "list", data, model: parsed.model, usage: { prompt_tokens: tokens, total_tokens: tokens } }))
      }
      if (state.requests.length + waiters.length + 1 >= state.holdFrom) waiters.push(answer)
      else answer()
    })
  })
  yield* Effect.acquireRelease(
    Effect.async<void>((resume) => void server.listen(0, "127.0.0.1", () => resume(Effect.void))),
    () => Effect.async<void>((resume) => {
      server.closeAllConnections()
      server.close(() => resume(Effect.void))
    })
  )
  const { port } = server.address() as { port: number }
  return Object.assign(state, { url: `http://127.0.0.1:${port}/v1` })
})
