import { assert, describe, layer } from "@effect/vitest"
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { Effect } from "effect"
import { createAgent, getAgent, liveAgent, uniqueWord } from "../agents/agents-support.js"
import { createApiKey, loginTestUser, request } from "../support/Client.js"
import { userIdOf } from "../support/Billing.js"
import { TestServer } from "../support/TestServer.js"
import { call, callOk, connect, count, type Credentials, ENV, failed, LIVE, newUser } from "./mcp-support.js"

/**
 * Spec 5.4 and 4.10 rule 10: every tool but `browse_marketplace` acts for a caller, who is the user behind a login
 * token (Bearer or the `token` cookie) or an API key (Bearer). Without one, or with a bad one, such a tool answers
 * a tool error and does nothing; it never falls back to anonymous use.
 */

/** Valid arguments for every identity-bound tool, aimed at `identifier`: identity is the only thing missing. */
const identityBound = (identifier: string): Record<string, Record<string, unknown>> => ({
  get_creator_profile: {},
  apply_creator: { displayName: "Mallory", bio: "b", accountType: "individual", email: "m@example.com" },
  create_expert: { name: "Intruder", description: "d", category: "other" },
  update_expert: { identifier, name: "Renamed", description: "changed", category: "coding" },
  get_expert_detail: { identifier },
  list_my_experts: {},
  install_skill: { identifier, skillName: "math" },
  list_expert_skills: { identifier },
  list_marketplace_skills: { keyword: "" },
  set_billing: { identifier, billingType: "ONE_TIME", price: 99 },
  publish_expert: { identifier },
  get_submission_status: { identifier },
  start_distillation: { topic: "t", materials: [{ filename: "a.md", content: "x" }] },
  continue_distillation: { sessionId: "ses_1", message: "m" },
  test_expert: { identifier, message: "hello" },
  open_expert_chat: { identifier },
  open_platform_page: { page: "studio" },
  list_evolution_suggestions: { identifier },
  accept_evolution: { suggestionId: "sug_1" },
  get_evolution_stats: { identifier },
  get_earnings: {}
})

/** What a tool could change: every table the 16 tools write, counted. */
const TABLES = ["agents", "agent_versions", "agent_submissions", "creators", "notifications", "purchases", "ledger_entries"]
const snapshot = Effect.forEach(TABLES, count)

/** Calls every identity-bound tool with `credentials`; each must be a tool error containing `message`. */
const refusedEverywhere = (client: Client, identifier: string, message: string) =>
  Effect.gen(function*() {
    const tools = identityBound(identifier)
    assert.strictEqual(Object.keys(tools).length, 21)
    for (const [name, args] of Object.entries(tools)) {
      const result = yield* call(client, name, args)
      failed(result, message)
      assert.strictEqual((result._meta as any)["atrium/error"].type, "unauthorized", name)
    }
  })

/** An owner with a live agent (instructions and tools set), and its detail as the owner sees it. */
const ownerWithAgent = Effect.gen(function*() {
  const owner = yield* newUser
  const word = uniqueWord()
  const identifier = yield* liveAgent(owner.token, {
    name: `Guarded ${word}`,
    description: "Someone else's",
    instructions: "secret sauce",
    tools: [{ name: "get_time", permission: "allow" }]
  })
  const detail = (yield* getAgent(owner.token, identifier)).body
  return { owner, identifier, word, detail }
})

const unchanged = (owner: { token: string }, identifier: string, detail: unknown, before: ReadonlyArray<number>) =>
  Effect.gen(function*() {
    assert.deepStrictEqual((yield* getAgent(owner.token, identifier)).body, detail)
    assert.deepStrictEqual(yield* snapshot, before)
  })

describe("mcp identity", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.scoped("without identity, every identity-bound tool is a tool error and changes nothing", () =>
      Effect.gen(function*() {
        const { detail, identifier, owner } = yield* ownerWithAgent
        const before = yield* snapshot
        const client = yield* connect()
        yield* refusedEverywhere(client, identifier, "Sign in required")
        yield* unchanged(owner, identifier, detail, before)
      }))

    it.scoped("a present but invalid credential is refused the same way, never treated as anonymous", () =>
      Effect.gen(function*() {
        const { detail, identifier, owner } = yield* ownerWithAgent
        const revoked = yield* createApiKey(owner.token, "revoked")
        const del = yield* request("POST", "/api/user/apiKey/delete", { token: owner.token, body: { id: revoked.id } })
        assert.strictEqual(del.status, 200, del.text)
        const before = yield* snapshot
        const cases: Array<[Credentials, string]> = [
          [{ bearer: "not-a-token" }, "Invalid or expired login token"],
          [{ bearer: `${owner.token}x` }, "Invalid or expired login token"],
          [{ bearer: "sk_thisKeyDoesNotExist0000000000000000000000" }, "Invalid or revoked API key"],
          [{ bearer: revoked.key }, "Invalid or revoked API key"],
          [{ cookie: "not-a-token" }, "Invalid or expired login token"],
          [{ cookie: revoked.key }, "not as a cookie"],
          [{ headers: { authorization: `Token ${owner.token}` } }, "Authorization scheme Bearer"],
          // A bad bearer is not rescued by a good cookie.
          [{ headers: { authorization: "Bearer junk", cookie: `token=${owner.token}` } }, "Invalid or expired login token"]
        ]
        for (const [credentials, message] of cases) {
          const client = yield* connect(credentials)
          yield* refusedEverywhere(client, identifier, message)
        }
        yield* unchanged(owner, identifier, detail, before)
      }))

    it.scoped("a login token replaced by a newer login (single device) is refused", () =>
      Effect.gen(function*() {
        const first = yield* loginTestUser()
        const stillValid = yield* connect({ bearer: first })
        assert.strictEqual((yield* callOk(stillValid, "get_creator_profile")).user_id, userIdOf(first))
        const second = yield* loginTestUser()
        const replaced = yield* connect({ bearer: first })
        failed(yield* call(replaced, "get_creator_profile"), "Invalid or expired login token")
        const current = yield* connect({ bearer: second })
        assert.strictEqual((yield* callOk(current, "get_creator_profile")).user_id, userIdOf(second))
      }))

    it.scoped("browse_marketplace works without identity, and with a bad one", () =>
      Effect.gen(function*() {
        const { identifier, word } = yield* ownerWithAgent
        for (const credentials of [undefined, { bearer: "not-a-token" }, { cookie: "junk" }] as Array<Credentials>) {
          const client = yield* connect(credentials)
          const found = yield* callOk(client, "browse_marketplace", { keyword: word })
          const [card] = found.data
          assert.match(card.icon_url, new RegExp(`^/api/market/agents/${identifier}/icon\\?v=`))
          assert.isString(card.published_at)
          assert.deepStrictEqual({ ...found, data: [{ ...card, icon_url: "(checked)", published_at: "(checked)" }] }, {
            data: [{
              identifier,
              name: `Guarded ${word}`,
              description: "Someone else's",
              category: "other",
              billing: { type: "FREE", price: 0, free_trial_per_user: 3, allow_trial: true },
              // Not an approved creator, nobody talked to it yet, nobody rated it, and no operator featured it.
              creator: null,
              usage: { conversations: 0, people: 0, recent_people: 0 },
              rating: { average: null, count: 0 },
              featured: false,
              icon_url: "(checked)",
              published_at: "(checked)"
            }],
            page: 1,
            pageSize: 20,
            total: 1
          })
        }
      }))

    it.scoped("an API key acts for its owner", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const key = yield* createApiKey(user.token)
        const client = yield* connect({ bearer: key.key })
        assert.strictEqual((yield* callOk(client, "get_creator_profile")).user_id, user.userId)
        const created = yield* callOk(client, "create_expert", { name: "Keyed", description: "via key", category: "coding" })
        // The owner sees it through /v1 with their login token: it is theirs.
        const viaV1 = yield* getAgent(user.token, created.identifier)
        assert.strictEqual(viaV1.status, 200, viaV1.text)
        assert.strictEqual(viaV1.body.name, "Keyed")
        const mine = yield* callOk(client, "list_my_experts")
        assert.deepStrictEqual(mine.data.map((a: any) => a.identifier), [created.identifier])
      }))

    it.scoped("the browser cookie `token` acts for its user", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const other = yield* newUser
        const theirs = yield* createAgent(other.token, { name: "Not yours" })
        const client = yield* connect({ cookie: user.token })
        assert.strictEqual((yield* callOk(client, "get_creator_profile")).user_id, user.userId)
        const created = yield* callOk(client, "create_expert", { name: "Cookied", description: "via cookie", category: "design" })
        assert.strictEqual((yield* getAgent(user.token, created.identifier)).body.name, "Cookied")
        // Acting as this user, not as anyone: another user's draft is as absent as a missing agent.
        failed(yield* call(client, "get_expert_detail", { identifier: theirs.identifier }), "No agent")
      }))
  })
})
