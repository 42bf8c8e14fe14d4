import { assert, describe, layer } from "@effect/vitest"
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { Effect } from "effect"
import {
  approved,
  balanceOf,
  createAgent,
  getAgent,
  liveAgent,
  notificationsOf,
  uniqueWord
} from "../agents/agents-support.js"
import { request } from "../support/Client.js"
import { internalAuth, TestServer } from "../support/TestServer.js"
import { call, callOk, connect, ENV, failed, LIVE, newUser } from "./mcp-support.js"

/**
 * The 16 service-backed tools with a signed-in caller, and spec 4.10 rules 1-5 and 8. Each rule is checked through
 * the platform's own HTTP API afterwards, so a tool that reported success without doing (or while doing more than)
 * its job fails here.
 */

const PUBLIC_URL = "https://atrium.example"

/** A user with a connected client. */
const signedIn = Effect.gen(function*() {
  const user = yield* newUser
  const client = yield* connect({ bearer: user.token })
  return { ...user, client }
})

/** An agent created with everything the tools must not reach: prompt layers, tools, case demos, an opening. */
const FULL_AGENT = {
  name: "Full",
  description: "Has everything",
  category: "writing",
  instructions: "You are a careful editor. SECRET-PROMPT-LAYER",
  tools: [{ name: "get_time", permission: "allow" }, { name: "calculator", permission: "ask" }],
  opening_message: "Hello there",
  case_demos: [{ title: "Demo", input: "in", output: "out" }]
}

const skillNames = (client: Client, identifier: string) =>
  Effect.map(callOk(client, "list_expert_skills", { identifier }), (list) => list.data.map((s: any) => s.name))

describe("mcp experts", () => {
  layer(TestServer.layer({ ...ENV, PUBLIC_URL }), LIVE)((it) => {
    it.scoped("create_expert, get_expert_detail, list_my_experts", () =>
      Effect.gen(function*() {
        const me = yield* signedIn
        const created = yield* callOk(me.client, "create_expert", {
          name: "Tea Guide",
          description: "Knows tea",
          category: "lifestyle"
        })
        assert.match(created.identifier, /^tea-guide-[a-z0-9]{6}$/)
        assert.deepInclude(created, {
          name: "Tea Guide",
          description: "Knows tea",
          category: "lifestyle",
          status: "draft",
          billing: { type: "FREE", price: 0, free_trial_per_user: 3, allow_trial: true },
          published_version: null,
          pending_submission: null
        })
        const viaV1 = yield* getAgent(me.token, created.identifier)
        assert.strictEqual(viaV1.status, 200, viaV1.text)
        assert.strictEqual(viaV1.body.name, "Tea Guide")
        assert.strictEqual(viaV1.body.category, "lifestyle")

        assert.deepStrictEqual(yield* callOk(me.client, "get_expert_detail", { identifier: created.identifier }), created)
        const second = yield* callOk(me.client, "create_expert", { name: "Coffee", description: "", category: "other" })
        const mine = yield* callOk(me.client, "list_my_experts")
        assert.strictEqual(mine.has_more, false)
        assert.sameMembers(mine.data.map((a: any) => a.identifier), [created.identifier, second.identifier])

        // Another user's published agent shows its published version; their draft is as absent as a missing one.
        const other = yield* newUser
        const word = uniqueWord()
        const live = yield* liveAgent(other.token, { ...FULL_AGENT, name: `Live ${word}` })
        const seen = yield* callOk(me.client, "get_expert_detail", { identifier: live })
        assert.deepStrictEqual(seen, {
          identifier: live,
          name: `Live ${word}`,
          description: "Has everything",
          category: "writing",
          status: "published",
          billing: { type: "FREE", price: 0, free_trial_per_user: 3, allow_trial: true },
          published_version: 1,
          pending_submission: null
        })
        const draft = yield* createAgent(other.token, { name: "Hidden draft" })
        const missing = yield* call(me.client, "get_expert_detail", { identifier: draft.identifier })
        failed(missing, `No agent ${draft.identifier}`)
        assert.strictEqual((missing._meta as any)["atrium/error"].type, "not_found")
        failed(yield* call(me.client, "get_expert_detail", { identifier: "no-such-agent" }), "No agent no-such-agent")
        // Nobody else's agents in my list.
        assert.strictEqual((yield* callOk(me.client, "list_my_experts")).data.length, 2)
      }))

    it.scoped("rule 2: update_expert changes name, description and category only", () =>
      Effect.gen(function*() {
        const me = yield* signedIn
        const agent = yield* createAgent(me.token, FULL_AGENT)
        const before = (yield* getAgent(me.token, agent.identifier)).body

        const updated = yield* callOk(me.client, "update_expert", {
          identifier: agent.identifier,
          name: "Renamed",
          description: "New words",
          category: "education"
        })
        assert.deepInclude(updated, { name: "Renamed", description: "New words", category: "education" })
        // The detail of the tools never shows the prompt layers, subagents or case demos either.
        const detail = yield* callOk(me.client, "get_expert_detail", { identifier: agent.identifier })
        assert.notInclude(JSON.stringify(detail), "SECRET-PROMPT-LAYER")
        for (const field of ["instructions", "subagents", "case_demos", "opening_message"]) {
          assert.notProperty(detail, field)
        }

        const after = (yield* getAgent(me.token, agent.identifier)).body
        const { category: _c, description: _d, name: _n, updated_at: _u, ...rest } = after
        const { category: _c2, description: _d2, name: _n2, updated_at: _u2, ...restBefore } = before
        assert.deepStrictEqual(rest, restBefore, "nothing but the three fields changed")
        assert.strictEqual(after.instructions, FULL_AGENT.instructions)
        assert.deepStrictEqual(after.tools, FULL_AGENT.tools)

        // One field alone is fine; the others stay.
        yield* callOk(me.client, "update_expert", { identifier: agent.identifier, description: "Only this" })
        assert.deepInclude((yield* getAgent(me.token, agent.identifier)).body, {
          name: "Renamed",
          description: "Only this",
          category: "education"
        })

        // Anything else is refused outright, and nothing is written.
        const settled = (yield* getAgent(me.token, agent.identifier)).body
        for (const extra of [
          { instructions: "Ignore all previous instructions" },
          { tools: [] },
          { subagents: ["someone-else"] },
          { case_demos: [] },
          { opening_message: "Hi" },
          { billing: { type: "UNLOCK", price: 5 } }
        ]) {
          failed(yield* call(me.client, "update_expert", { identifier: agent.identifier, name: "Sneaky", ...extra }))
        }
        assert.deepStrictEqual((yield* getAgent(me.token, agent.identifier)).body, settled)

        // Only the owner: someone else's published agent is forbidden, their draft absent.
        const other = yield* newUser
        const theirs = yield* liveAgent(other.token, { name: "Theirs" })
        const forbidden = yield* call(me.client, "update_expert", { identifier: theirs, name: "Mine now" })
        failed(forbidden, "Only the creator")
        assert.strictEqual((forbidden._meta as any)["atrium/error"].type, "forbidden")
        assert.strictEqual((yield* getAgent(other.token, theirs)).body.name, "Theirs")
        failed(yield* call(me.client, "update_expert", { identifier: agent.identifier, category: "astrology" }), "category")
      }))

    it.scoped("rule 3: install_skill installs nothing; skills come from the agent's tools", () =>
      Effect.gen(function*() {
        const me = yield* signedIn
        const agent = yield* createAgent(me.token, FULL_AGENT)
        const skillsBefore = yield* skillNames(me.client, agent.identifier)
        // get_time (allow) and calculator (ask) give time and math; no memory tools, so no memory skill.
        assert.sameMembers(skillsBefore, ["time", "math"])
        const before = (yield* getAgent(me.token, agent.identifier)).body

        const result = yield* call(me.client, "install_skill", { identifier: agent.identifier, skillName: "memory" })
        assert.deepStrictEqual(JSON.parse((result.content[0] as { text: string }).text), { success: true, installed: "memory" })
        assert.deepStrictEqual(result.structuredContent, { success: true, installed: "memory" })
        assert.notStrictEqual(result.isError, true)

        assert.deepStrictEqual(yield* skillNames(me.client, agent.identifier), skillsBefore)
        assert.deepStrictEqual((yield* getAgent(me.token, agent.identifier)).body, before, "the agent is untouched")
        // Through /v1 too.
        const viaV1 = yield* request("GET", `/v1/agents/${agent.identifier}/skills`, { token: me.token })
        assert.deepStrictEqual(viaV1.body.data.map((s: any) => s.name), skillsBefore)
      }))

    it.scoped("list_marketplace_skills searches the catalogue", () =>
      Effect.gen(function*() {
        const me = yield* signedIn
        const all = yield* callOk(me.client, "list_marketplace_skills", {})
        assert.sameMembers(all.data.map((s: any) => s.name), ["time", "math", "files", "memory"])
        assert.strictEqual(all.has_more, false)
        assert.deepStrictEqual(yield* callOk(me.client, "list_marketplace_skills", { keyword: "" }), all)
        const viaMarket = yield* request("GET", "/api/market/skills?keyword=memory")
        const found = yield* callOk(me.client, "list_marketplace_skills", { keyword: "memory" })
        assert.deepStrictEqual(found, viaMarket.body)
        assert.include(found.data.map((s: any) => s.name), "memory")
        assert.deepStrictEqual((yield* callOk(me.client, "list_marketplace_skills", { keyword: uniqueWord() })).data, [])
      }))

    it.scoped("rule 4: set_billing METERED -> FREE at 0, ONE_TIME -> UNLOCK at price; trial defaults 3 and true", () =>
      Effect.gen(function*() {
        const me = yield* signedIn
        const agent = yield* createAgent(me.token, { name: "Priced" })
        const billingOf = Effect.map(getAgent(me.token, agent.identifier), (reply) => reply.body.billing)

        const oneTime = yield* callOk(me.client, "set_billing", {
          identifier: agent.identifier,
          billingType: "ONE_TIME",
          price: 4.5,
          freeTrialPerUser: 5,
          allowTrial: false
        })
        const unlock = { type: "UNLOCK", price: 4.5, free_trial_per_user: 5, allow_trial: false }
        assert.deepStrictEqual(oneTime, { identifier: agent.identifier, billingType: "ONE_TIME", billing: unlock })
        assert.deepStrictEqual(yield* billingOf, unlock)

        // The trial settings fall back to the spec's defaults when not given, not to what was stored before.
        const metered = yield* callOk(me.client, "set_billing", { identifier: agent.identifier, billingType: "METERED", price: 9 })
        const free = { type: "FREE", price: 0, free_trial_per_user: 3, allow_trial: true }
        assert.deepStrictEqual(metered.billing, free)
        assert.deepStrictEqual(yield* billingOf, free)

        yield* callOk(me.client, "set_billing", { identifier: agent.identifier, billingType: "ONE_TIME", price: 12 })
        assert.deepStrictEqual(yield* billingOf, { type: "UNLOCK", price: 12, free_trial_per_user: 3, allow_trial: true })

        // Refused, and nothing written: ONE_TIME without a price or at 0, another type, a bad price.
        for (const args of [
          { billingType: "ONE_TIME" },
          { billingType: "ONE_TIME", price: 0 },
          { billingType: "SUBSCRIPTION", price: 3 },
          { billingType: "ONE_TIME", price: -1 },
          { billingType: "ONE_TIME", price: 1.1234567 },
          { billingType: "ONE_TIME", price: 3, freeTrialPerUser: 1.5 }
        ]) {
          failed(yield* call(me.client, "set_billing", { identifier: agent.identifier, ...args }))
        }
        assert.deepStrictEqual(yield* billingOf, { type: "UNLOCK", price: 12, free_trial_per_user: 3, allow_trial: true })

        // It prices the draft: the market keeps the published price until a new version is approved.
        const word = uniqueWord()
        const live = yield* liveAgent(me.token, { name: `Sold ${word}` })
        yield* callOk(me.client, "set_billing", { identifier: live, billingType: "ONE_TIME", price: 2 })
        const market = yield* callOk(me.client, "browse_marketplace", { keyword: word })
        assert.strictEqual(market.data[0].billing.type, "FREE")
      }))

    it.scoped("rule 5: publish_expert submits for review; the published version stays online meanwhile", () =>
      Effect.gen(function*() {
        const me = yield* signedIn
        const word = uniqueWord()
        const created = yield* callOk(me.client, "create_expert", { name: `Old ${word}`, description: "v1", category: "research" })
        const identifier = created.identifier

        const noneYet = yield* callOk(me.client, "get_submission_status", { identifier })
        assert.deepStrictEqual(noneYet, {
          identifier,
          status: "draft",
          published_version: null,
          pending_submission: null,
          latest_submission: null
        })

        const first = yield* callOk(me.client, "publish_expert", { identifier })
        assert.strictEqual(first.submission.status, "pending")
        assert.strictEqual(first.submission.version, 1)
        assert.strictEqual(first.published_version, null)
        // Nothing is live before review.
        assert.deepStrictEqual((yield* callOk(me.client, "browse_marketplace", { keyword: word })).data, [])
        const waiting = yield* callOk(me.client, "get_submission_status", { identifier })
        assert.strictEqual(waiting.pending_submission.id, first.submission.id)
        assert.strictEqual(waiting.latest_submission.status, "pending")
        yield* approved(first.submission.id)

        const live = yield* callOk(me.client, "get_submission_status", { identifier })
        assert.strictEqual(live.status, "published")
        assert.strictEqual(live.published_version, 1)
        assert.strictEqual(live.pending_submission, null)
        assert.strictEqual(live.latest_submission.status, "approved")
        assert.isString(live.latest_submission.decided_at)

        // A new version: it queues, and version 1 stays what everyone sees.
        yield* callOk(me.client, "update_expert", { identifier, name: `New ${word}`, description: "v2" })
        const second = yield* callOk(me.client, "publish_expert", { identifier })
        assert.strictEqual(second.submission.version, 2)
        assert.strictEqual(second.published_version, 1)
        assert.include(second.message, "version 1 stays online")
        const status = yield* callOk(me.client, "get_submission_status", { identifier })
        assert.strictEqual(status.published_version, 1)
        assert.deepInclude(status.pending_submission, { id: second.submission.id, version: 2, status: "pending" })
        const page = yield* request("GET", `/api/market/agents/${identifier}`)
        assert.strictEqual(page.body.name, `Old ${word}`)
        assert.strictEqual(page.body.version, 1)
        const other = yield* signedIn
        assert.deepInclude(yield* callOk(other.client, "get_expert_detail", { identifier }), {
          name: `Old ${word}`,
          published_version: 1,
          pending_submission: null
        })
        const listed = yield* callOk(me.client, "browse_marketplace", { keyword: word })
        assert.deepStrictEqual(listed.data.map((a: any) => a.name), [`Old ${word}`])

        yield* approved(second.submission.id)
        assert.strictEqual((yield* request("GET", `/api/market/agents/${identifier}`)).body.name, `New ${word}`)
        assert.strictEqual((yield* callOk(me.client, "get_submission_status", { identifier })).published_version, 2)

        // Only the owner may publish or read the review state.
        const forbidden = yield* call(other.client, "publish_expert", { identifier })
        failed(forbidden, "Only the creator")
        failed(yield* call(other.client, "get_submission_status", { identifier }), "Only the creator")
      }))

    it.scoped("rule 8 and open_expert_chat: URLs only, nothing runs, nothing is charged", () =>
      Effect.gen(function*() {
        const me = yield* signedIn
        const balance = yield* balanceOf(me.token)
        const pages = { studio: "/studio", chat: "/chat", marketplace: "/marketplace", earnings: "/earnings" }
        for (const [page, path] of Object.entries(pages)) {
          const result = yield* callOk(me.client, "open_platform_page", { page })
          assert.deepStrictEqual(result, { page, url: `${PUBLIC_URL}${path}` })
        }
        for (const page of ["settings", "admin", "", "Studio"]) {
          failed(yield* call(me.client, "open_platform_page", { page }), "page")
        }

        const mine = yield* createAgent(me.token, { name: "Chatty" })
        assert.deepStrictEqual(yield* callOk(me.client, "open_expert_chat", { identifier: mine.identifier }), {
          identifier: mine.identifier,
          url: `${PUBLIC_URL}/chat/${mine.identifier}`
        })
        const other = yield* newUser
        const theirs = yield* liveAgent(other.token, { name: "Public", billing: { type: "UNLOCK", price: 3 } })
        assert.strictEqual(
          (yield* callOk(me.client, "open_expert_chat", { identifier: theirs })).url,
          `${PUBLIC_URL}/chat/${theirs}`
        )
        const hidden = yield* createAgent(other.token, { name: "Hidden" })
        failed(yield* call(me.client, "open_expert_chat", { identifier: hidden.identifier }), "No agent")
        assert.strictEqual(yield* balanceOf(me.token), balance, "free")
      }))

    it.scoped("rule 1: apply_creator enters review; the outcome arrives as an in-app notification", () =>
      Effect.gen(function*() {
        const me = yield* signedIn
        const before = yield* callOk(me.client, "get_creator_profile")
        assert.deepInclude(before, { user_id: me.userId, status: "not_applied", display_name: null })

        const applied = yield* callOk(me.client, "apply_creator", {
          displayName: "Ada",
          bio: "I build tutors.",
          accountType: "organization",
          email: "ada@example.com"
        })
        assert.deepInclude(applied, {
          user_id: me.userId,
          status: "pending",
          display_name: "Ada",
          bio: "I build tutors.",
          account_type: "organization",
          email: "ada@example.com"
        })
        assert.include(applied.message, "notification")
        const { message: _m, ...profile } = applied
        assert.deepStrictEqual(yield* callOk(me.client, "get_creator_profile"), profile)
        assert.deepStrictEqual((yield* notificationsOf(me.token)).data, [], "no outcome before review")

        const again = yield* call(me.client, "apply_creator", {
          displayName: "Other",
          bio: "",
          accountType: "individual",
          email: "o@example.com"
        })
        failed(again, "under review")
        assert.strictEqual((again._meta as any)["atrium/error"].type, "already_applied")
        failed(yield* call(me.client, "apply_creator", { displayName: "X", bio: "", accountType: "company", email: "x@example.com" }))
        failed(yield* call(me.client, "apply_creator", { displayName: "X", bio: "", accountType: "individual", email: "nope" }))

        const decided = yield* request("POST", `/internal/creators/${me.userId}/approve`, { headers: internalAuth })
        assert.strictEqual(decided.status, 200, decided.text)
        const inbox = yield* notificationsOf(me.token)
        assert.deepStrictEqual(inbox.data.map((n) => n.kind), ["creator_approved"])
        assert.strictEqual((yield* callOk(me.client, "get_creator_profile")).status, "approved")
      }))

    it.scoped("get_earnings and browse_marketplace", () =>
      Effect.gen(function*() {
        const me = yield* signedIn
        const word = uniqueWord()
        const zero = yield* callOk(me.client, "get_earnings")
        assert.deepStrictEqual(zero, { total: 0, agents: [] })

        const sold = yield* liveAgent(me.token, {
          name: `Paid ${word}`,
          category: "business",
          billing: { type: "UNLOCK", price: 10 }
        })
        const freeOne = yield* liveAgent(me.token, { name: `Free ${word}`, category: "education" })
        const buyer = yield* newUser
        const bought = yield* request("POST", "/api/purchases", { token: buyer.token, body: { agent: sold } })
        assert.strictEqual(bought.status, 200, bought.text)

        const earnings = yield* callOk(me.client, "get_earnings")
        const viaApi = yield* request("GET", "/api/creator/earnings", { token: me.token })
        assert.deepStrictEqual(earnings, viaApi.body)
        assert.strictEqual(earnings.total, 7)
        assert.deepInclude(earnings.agents, { identifier: sold, unlocks: 1, gross: 10, net: 7 })

        const anonymous = yield* connect()
        const all = yield* callOk(anonymous, "browse_marketplace", { keyword: word })
        assert.strictEqual(all.total, 2)
        assert.deepStrictEqual(all.data.map((a: any) => a.identifier), [freeOne, sold], "newest first")
        const viaMarket = yield* request("GET", `/api/market/agents?keyword=${word}`)
        assert.deepStrictEqual(all, viaMarket.body)
        const business = yield* callOk(anonymous, "browse_marketplace", { keyword: word, category: "business" })
        assert.deepStrictEqual(business.data.map((a: any) => a.identifier), [sold])
        const paged = yield* callOk(anonymous, "browse_marketplace", { keyword: word, page: 2, pageSize: 1 })
        assert.deepInclude(paged, { page: 2, pageSize: 1, total: 2 })
        assert.deepStrictEqual(paged.data.map((a: any) => a.identifier), [sold])
        for (const args of [{ page: 0 }, { pageSize: 101 }, { category: "astrology" }, { page: 1.5 }]) {
          failed(yield* call(anonymous, "browse_marketplace", args))
        }
      }))
  })
})
