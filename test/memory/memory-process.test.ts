import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { requestAt } from "../support/Client.js"
import { launchPlatform } from "../support/Process.js"
import { parseStream, textOf } from "../support/Sse.js"
import { makeMigratedStorage } from "../support/TestServer.js"

/**
 * The contract on the compiled build (issue 47, "Done when"): a fact an end user's expert saved in one session is in
 * the next session's context, and gone from it once the end user deletes it. `dist/main.js` as users run it.
 */

const PHONE = "+15550004747"
const CODE = "474747"

/** One message to a session, its stream read to the end. */
const say = (base: string, key: string, endUser: string, session: string, message: string) =>
  Effect.promise(async () => {
    const response = await fetch(`${base}/v1/sessions/${session}/events`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "x-end-user-id": endUser, "content-type": "application/json" },
      body: JSON.stringify({ type: "message", message })
    })
    return parseStream(await response.text())
  })

describe("memory on the compiled build", () => {
  it.scoped("session 1 saves a fact; session 2's context has it; after DELETE the next turn's has not", () =>
    Effect.gen(function*() {
      const storage = yield* makeMigratedStorage
      const platform = yield* launchPlatform({
        ...storage.env,
        JWT_SECRET: "memory-process-secret-memory-process-secret-0123",
        SMS_TEST_OTP: `${PHONE}=${CODE}`
      })
      const base = platform.url
      const login = yield* requestAt(base, "POST", "/api/auth/login", { body: { phone: PHONE, code: CODE } })
      assert.strictEqual(login.status, 200, login.text)
      const token = login.body.token as string
      const key = (yield* requestAt(base, "POST", "/api/user/apiKey/create", { token, body: { name: "memory" } })).body.key as string
      const created = yield* requestAt(base, "POST", "/v1/agents", {
        token,
        body: {
          name: "Remembers",
          instructions: "Answer briefly.",
          memory: { enabled: true, blocks: [{ label: "human", description: "Who the user is", limit: 200 }] }
        }
      })
      assert.strictEqual(created.status, 201, created.text)
      const agent = created.body.identifier as string
      const headers = { "x-end-user-id": "carol" }

      const session = (yield* requestAt(base, "POST", "/v1/sessions", { token: key, headers, body: { agent } })).body.id as string
      const saved = yield* say(base, key, "carol", session, `/tool fact_add ${JSON.stringify({ text: "Carol's cat is called Miso" })}`)
      const result = saved.events.find((event) => event.event === "tool_call.result")
      assert.isDefined(result, saved.raw)
      const factId = result!.data.output.id as string

      const next = (yield* requestAt(base, "POST", "/v1/sessions", { token: key, headers, body: { agent } })).body.id as string
      assert.notStrictEqual(next, session)
      const context = textOf(yield* say(base, key, "carol", next, "/system"))
      assert.include(context, `[${factId}] Carol's cat is called Miso`)
      // Another end user of the same key: nothing of Carol's.
      const other = (yield* requestAt(base, "POST", "/v1/sessions", { token: key, headers: { "x-end-user-id": "dave" }, body: { agent } })).body.id as string
      assert.notInclude(textOf(yield* say(base, key, "dave", other, "/system")), "Miso")

      const deleted = yield* requestAt(base, "DELETE", `/v1/memory/facts/${factId}?agent=${agent}`, { token: key, headers })
      assert.strictEqual(deleted.status, 200, deleted.text)
      assert.notInclude(textOf(yield* say(base, key, "carol", next, "/system")), "Miso")
    }), { timeout: 240_000 })
})
