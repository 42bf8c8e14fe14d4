import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import {
  approved,
  assertError,
  browse,
  createAgent,
  ENV,
  liveAgent,
  LIVE,
  marketIdentifiers,
  newUser,
  patchAgent,
  publish,
  reject,
  uniqueWord
} from "../agents/agents-support.js"

/**
 * The public marketplace (`/api/market/*`, spec 4.7; issue 4 items 4 and 6): no login, published versions only.
 * Every request here is sent without credentials.
 */

const CATEGORIES = ["writing", "coding", "research", "education", "business", "design", "productivity", "lifestyle", "other"]

const categoryCounts = Effect.gen(function*() {
  const reply = yield* request("GET", "/api/market/categories")
  assert.strictEqual(reply.status, 200, reply.text)
  return new Map<string, number>(reply.body.data.map((c: { id: string; count: number }) => [c.id, c.count]))
})

describe("market", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("drafts never appear in the market, nor do pending or rejected versions", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const word = uniqueWord()
        const before = yield* categoryCounts
        const agent = yield* createAgent(owner.token, { name: `Draft ${word}`, description: word, category: "research" })
        const absent = Effect.gen(function*() {
          assert.deepStrictEqual(yield* marketIdentifiers(word), [])
          assertError(yield* request("GET", `/api/market/agents/${agent.identifier}`), 404, "not_found")
          const inCategory = yield* browse({ category: "research", pageSize: 100 })
          assert.notInclude(inCategory.text, word)
          assert.strictEqual((yield* categoryCounts).get("research"), before.get("research"))
        })
        yield* absent
        const first = yield* publish(owner.token, agent.identifier)
        yield* absent
        yield* reject(first.id, "Not yet")
        yield* absent
        const second = yield* publish(owner.token, agent.identifier)
        yield* absent
        yield* approved(second.id)
        assert.deepStrictEqual(yield* marketIdentifiers(word), [agent.identifier])
        assert.strictEqual((yield* categoryCounts).get("research"), before.get("research")! + 1)
        // Its later drafts stay out: the market keeps showing the approved version.
        const draftWord = uniqueWord()
        yield* patchAgent(owner.token, agent.identifier, { name: `Draft ${draftWord}`, category: "design" })
        assert.deepStrictEqual(yield* marketIdentifiers(draftWord), [])
        const page = yield* request("GET", `/api/market/agents/${agent.identifier}`)
        assert.strictEqual(page.body.name, `Draft ${word}`)
        assert.strictEqual(page.body.category, "research")
        assert.strictEqual((yield* categoryCounts).get("design"), before.get("design"))
      }))

    it.effect("a listing is {data, page, pageSize, total}; items carry identifier, name, description, category, billing, creator, usage", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const word = uniqueWord()
        const identifier = yield* liveAgent(owner.token, {
          name: `Listed ${word}`,
          description: "Shows up",
          category: "writing",
          instructions: "secret sauce",
          billing: { type: "UNLOCK", price: 4.5, free_trial_per_user: 2 }
        })
        const reply = yield* browse({ keyword: word })
        assert.strictEqual(reply.status, 200, reply.text)
        const { icon_url, published_at, ...card } = reply.body.data[0]
        assert.match(icon_url, new RegExp(`^/api/market/agents/${identifier}/icon\\?v=`))
        assert.strictEqual(new Date(published_at).toISOString(), published_at)
        assert.deepStrictEqual({ ...reply.body, data: [card] }, {
          data: [{
            identifier,
            name: `Listed ${word}`,
            description: "Shows up",
            category: "writing",
            billing: { type: "UNLOCK", price: 4.5, free_trial_per_user: 2, allow_trial: true },
            creator: null,
            usage: { conversations: 0, people: 0, recent_people: 0 },
            rating: { average: null, count: 0 },
            featured: false
          }],
          page: 1,
          pageSize: 20,
          total: 1
        })
        assert.notInclude(reply.text, "secret sauce")
        // Usage counts conversations and the people who had them (issue 27: the cards show them), the creator's own left
        // out (issue 48).
        const buyer = yield* newUser
        for (const token of [buyer.token, buyer.token, owner.token]) {
          const made = yield* request("POST", "/v1/sessions", { token, body: { agent: identifier } })
          assert.strictEqual(made.status, 201, made.text)
        }
        const used = yield* browse({ keyword: word })
        // The creator's own conversation (a test chat) is not public usage.
        assert.deepStrictEqual(used.body.data[0].usage, { conversations: 2, people: 1, recent_people: 0 })
        // No login needed, and a bad token does not matter either.
        const withJunk = yield* request("GET", `/api/market/agents?keyword=${word}`, { token: "not-a-token" })
        assert.strictEqual(withJunk.status, 200, withJunk.text)
      }))

    it.effect("keyword matches name or description, case-insensitively, with % and _ taken literally", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const word = uniqueWord()
        const byName = yield* liveAgent(owner.token, { name: `Poet ${word}`, description: "Writes verse" })
        const byDescription = yield* liveAgent(owner.token, { name: "Essayist", description: `Prose about ${word}` })
        assert.sameMembers(yield* marketIdentifiers(word), [byName, byDescription])
        assert.sameMembers(yield* marketIdentifiers(word.toUpperCase()), [byName, byDescription])
        assert.deepStrictEqual(yield* marketIdentifiers(`poet ${word}`), [byName])
        assert.deepStrictEqual(yield* marketIdentifiers(`${word}%`), [])
        assert.deepStrictEqual(yield* marketIdentifiers(`${word.slice(0, 3)}_${word.slice(4)}`), [])
      }))

    it.effect("category filter, paging and bad parameters", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const word = uniqueWord()
        const made: Array<string> = []
        for (let i = 0; i < 5; i++) {
          made.push(yield* liveAgent(owner.token, { name: `Paged ${word} ${i}`, category: i < 3 ? "business" : "education" }))
        }
        const pages = []
        for (const page of [1, 2, 3, 4]) {
          const reply = yield* browse({ keyword: word, page, pageSize: 2 })
          assert.strictEqual(reply.status, 200, reply.text)
          assert.strictEqual(reply.body.total, 5)
          assert.strictEqual(reply.body.page, page)
          assert.strictEqual(reply.body.pageSize, 2)
          pages.push(reply.body.data.map((item: { identifier: string }) => item.identifier))
        }
        assert.deepStrictEqual(pages.map((p) => p.length), [2, 2, 1, 0])
        assert.sameMembers(pages.flat(), made, "every agent once, none twice")
        // Newest first.
        assert.deepStrictEqual(pages.flat(), [...made].reverse())

        const business = yield* browse({ keyword: word, category: "business" })
        assert.sameMembers(business.body.data.map((item: any) => item.identifier), made.slice(0, 3))
        assert.strictEqual(business.body.total, 3)
        assert.isTrue(business.body.data.every((item: any) => item.category === "business"))

        for (const [query, field] of [
          [{ category: "astrology" }, "category"],
          [{ page: 0 }, "page"],
          [{ page: "two" }, "page"],
          [{ pageSize: 101 }, "pageSize"],
          [{ pageSize: 0 }, "pageSize"]
        ] as const) {
          const reply = yield* browse(query)
          assertError(reply, 400, "invalid_request")
          assert.include(reply.body.error.message, field)
        }
      }))

    it.effect("GET /api/market/categories lists every category with its count of published agents", () =>
      Effect.gen(function*() {
        const before = yield* categoryCounts
        assert.deepStrictEqual([...before.keys()], CATEGORIES)
        const owner = yield* newUser
        yield* liveAgent(owner.token, { name: "Counted", category: "productivity" })
        yield* liveAgent(owner.token, { name: "Counted 2", category: "productivity" })
        yield* createAgent(owner.token, { name: "Not counted", category: "productivity" })
        const after = yield* categoryCounts
        assert.strictEqual(after.get("productivity"), before.get("productivity")! + 2)
        for (const id of CATEGORIES.filter((c) => c !== "productivity")) assert.strictEqual(after.get(id), before.get(id), id)
      }))

    it.effect("GET /api/market/agents/:identifier is the public page of the published version", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const identifier = yield* liveAgent(owner.token, {
          name: "Page",
          description: "Public page",
          category: "coding",
          instructions: "secret sauce",
          opening_message: "Hello",
          case_demos: [{ input: "q", output: "a" }],
          tools: [{ name: "get_time", permission: "allow" }, { name: "calculator", permission: "ask" }],
          billing: { type: "UNLOCK", price: 1 }
        })
        const reply = yield* request("GET", `/api/market/agents/${identifier}`)
        assert.strictEqual(reply.status, 200, reply.text)
        const { icon_url, published_at, ...rest } = reply.body
        assert.strictEqual(new Date(published_at).toISOString(), published_at)
        assert.match(icon_url, /\/icon\?v=g/)
        assert.deepStrictEqual(rest, {
          identifier,
          name: "Page",
          description: "Public page",
          category: "coding",
          opening_message: "Hello",
          case_demos: [{ input: "q", output: "a" }],
          billing: { type: "UNLOCK", price: 1, free_trial_per_user: 3, allow_trial: true },
          tools: ["get_time", "calculator"],
          version: 1,
          creator: null,
          skills: [
            { name: "math", title: "Calculator", description: "Evaluates arithmetic exactly instead of guessing at numbers.", tools: ["calculator"] },
            { name: "time", title: "Current time", description: "Tells the current date and time in any time zone.", tools: ["get_time"] }
          ],
          rating: { average: null, count: 0 },
          usage: { conversations: 0, people: 0, recent_people: 0 },
          featured: false
        })
        assertError(yield* request("GET", "/api/market/agents/no-such-agent"), 404, "not_found")
      }))

    it.effect("GET /api/market/skills searches the catalogue; the seeded skills map to built-in tools", () =>
      Effect.gen(function*() {
        const all = yield* request("GET", "/api/market/skills")
        assert.strictEqual(all.status, 200, all.text)
        assert.strictEqual(all.body.has_more, false)
        assert.deepStrictEqual(
          all.body.data.map((s: any) => [s.name, s.tools]),
          [
            ["files", ["write_file", "read_file", "list_files"]],
            ["math", ["calculator"]],
            ["memory", ["memory_save", "memory_search"]],
            ["time", ["get_time"]]
          ]
        )
        for (const skill of all.body.data) {
          assert.deepStrictEqual(Object.keys(skill).sort(), ["description", "name", "title", "tools"])
          assert.isAbove(skill.title.length, 0)
          assert.isAbove(skill.description.length, 0)
        }
        const names = (keyword: string) =>
          Effect.map(request("GET", `/api/market/skills?keyword=${encodeURIComponent(keyword)}`), (reply) => {
            assert.strictEqual(reply.status, 200, reply.text)
            return reply.body.data.map((s: any) => s.name)
          })
        assert.deepStrictEqual(yield* names("memory"), ["memory"])
        assert.deepStrictEqual(yield* names("CALCULATOR"), ["math"])
        assert.deepStrictEqual(yield* names("time zone"), ["time"])
        assert.deepStrictEqual(yield* names("nothing-like-this"), [])
        assert.deepStrictEqual(yield* names("%"), [])
        assert.deepStrictEqual(yield* names(""), ["files", "math", "memory", "time"])
      }))
  })
})
