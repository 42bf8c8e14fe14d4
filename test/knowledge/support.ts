import { assert } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI from "openai"
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
  Effect.gen(function*() {
    for (let i = 0; i < 600; i++) {
      const file = yield* Effect.promise(() => client.vectorStores.files.retrieve(fileId, { vector_store_id: storeId }))
      if (file.status !== "in_progress") return file
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 50)))
    }
    return assert.fail(`${fileId} was still in progress`)
  })
