import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { loginWithSms, request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { assertError, browse, ENV, LIVE, liveAgent, newUser, uniqueWord } from "../agents/agents-support.js"

/**
 * The marketplace as a store (issue 48 item 4, docs/marketplace.md): sorting, ratings and reviews by people who used
 * an expert, icons (uploaded or drawn), featured and category sections, creator pages, and the creator's own use
 * kept out of every public count.
 */

const OPERATOR = "+15550008888"

const run = (token: string, agent: string) =>
  Effect.gen(function*() {
    const reply = yield* request("POST", "/v1/agents/run", { token, body: { agent, message: "hello", stream: false } })
    assert.strictEqual(reply.status, 200, reply.text)
  })

const identifiers = (reply: { body: any }) => reply.body.data.map((item: { identifier: string }) => item.identifier)

const review = (token: string, identifier: string, body: unknown) =>
  request("PUT", `/api/market/agents/${identifier}/review`, { token, body })

/** A tiny valid PNG (1x1), a JPEG's and a WebP's first bytes: the icon check reads only the start. */
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
  "base64"
)
const WEBP = Buffer.concat([Buffer.from("RIFF"), Buffer.from([0x10, 0, 0, 0]), Buffer.from("WEBPVP8 "), Buffer.alloc(8)])

describe("market store", () => {
  layer(TestServer.layer({ ...ENV, ADMIN_PHONES: OPERATOR }), LIVE)((it) => {
    it.effect("sort: new, popular (accounts in 30 days, the creator's own runs left out), rating, price", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const word = uniqueWord()
        const cheap = yield* liveAgent(owner.token, { name: `Cheap ${word}`, billing: { type: "UNLOCK", price: 1 } })
        const dear = yield* liveAgent(owner.token, { name: `Dear ${word}`, billing: { type: "UNLOCK", price: 9 } })
        const free = yield* liveAgent(owner.token, { name: `Free ${word}` })
        assert.deepStrictEqual(identifiers(yield* browse({ keyword: word })), [free, dear, cheap])
        assert.deepStrictEqual(identifiers(yield* browse({ keyword: word, sort: "new" })), [free, dear, cheap])
        assert.deepStrictEqual(identifiers(yield* browse({ keyword: word, sort: "price" })), [free, cheap, dear])

        // The creator chatting with their own expert, many times, does not make it popular.
        for (let i = 0; i < 3; i++) yield* run(owner.token, cheap)
        const session = yield* request("POST", "/v1/sessions", { token: owner.token, body: { agent: cheap } })
        assert.strictEqual(session.status, 201, session.text)
        const alone = yield* browse({ keyword: word, sort: "popular" })
        assert.deepStrictEqual(identifiers(alone), [free, dear, cheap])
        assert.deepStrictEqual(alone.body.data[2].usage, { conversations: 0, people: 0, recent_people: 0 })

        const buyer = yield* newUser
        const second = yield* newUser
        yield* run(buyer.token, free)
        yield* run(buyer.token, cheap)
        yield* run(second.token, cheap)
        const popular = yield* browse({ keyword: word, sort: "popular" })
        assert.deepStrictEqual(identifiers(popular), [cheap, free, dear])
        assert.strictEqual(popular.body.data[0].usage.recent_people, 2)

        // Rating: the best average first, unrated last.
        yield* Effect.forEach([[buyer, free, 3], [buyer, cheap, 5], [second, cheap, 4]] as const, ([user, agent, rating]) =>
          Effect.map(review(user.token, agent, { rating }), (reply) => assert.strictEqual(reply.status, 200, reply.text)))
        const rated = yield* browse({ keyword: word, sort: "rating" })
        assert.deepStrictEqual(identifiers(rated), [cheap, free, dear])
        assert.deepStrictEqual(rated.body.data.map((item: any) => item.rating), [
          { average: 4.5, count: 2 },
          { average: 3, count: 1 },
          { average: null, count: 0 }
        ])
        assertError(yield* browse({ sort: "cheapest" }), 400, "invalid_request")
      }))

    it.effect("reviews: only after a run, never the creator's, one per person (editable), paged, deletable", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const identifier = yield* liveAgent(owner.token, { name: `Reviewed ${uniqueWord()}` })
        const reader = yield* newUser
        const mine = (token: string) => request("GET", `/api/market/agents/${identifier}/review`, { token })

        // Before a run: 409, and the form is told why.
        assertError(yield* review(reader.token, identifier, { rating: 4 }), 409, "not_used_yet")
        assert.deepInclude((yield* mine(reader.token)).body, { may_review: false, review: null })
        // The creator, even after running it: 403.
        yield* run(owner.token, identifier)
        assertError(yield* review(owner.token, identifier, { rating: 5, text: "Mine is great" }), 403, "forbidden")
        assert.isFalse((yield* mine(owner.token)).body.may_review)
        assertError(yield* review(reader.token, "no-such-agent", { rating: 4 }), 404, "not_found")
        assertError(yield* request("PUT", `/api/market/agents/${identifier}/review`, { body: { rating: 4 } }), 401, "unauthorized")

        yield* run(reader.token, identifier)
        for (const bad of [{ rating: 0 }, { rating: 6 }, { rating: 2.5 }, {}, { rating: 3, text: "x".repeat(2001) }]) {
          assertError(yield* review(reader.token, identifier, bad), 400, "invalid_request")
        }
        const written = yield* review(reader.token, identifier, { rating: 2, text: "  Slow  " })
        assert.strictEqual(written.status, 200, written.text)
        assert.deepInclude(written.body, { rating: 2, text: "Slow" })
        const edited = yield* review(reader.token, identifier, { rating: 4, text: "Better now" })
        assert.strictEqual(edited.body.id, written.body.id, "one review per person: an edit keeps it")
        assert.deepInclude((yield* mine(reader.token)).body, { may_review: true, reason: null })
        assert.strictEqual((yield* mine(reader.token)).body.review.text, "Better now")

        const others = [yield* newUser, yield* newUser]
        for (const [i, user] of others.entries()) {
          yield* run(user.token, identifier)
          assert.strictEqual((yield* review(user.token, identifier, { rating: 1 + i })).status, 200)
        }
        const page = yield* request("GET", `/api/market/agents/${identifier}`)
        assert.deepStrictEqual(page.body.rating, { average: 2.33, count: 3 })
        const first = yield* request("GET", `/api/market/agents/${identifier}/reviews?limit=2`)
        assert.strictEqual(first.status, 200, first.text)
        assert.strictEqual(first.body.data.length, 2)
        assert.isTrue(first.body.has_more)
        const rest = yield* request("GET", `/api/market/agents/${identifier}/reviews?limit=2&after=${first.body.data[1].id}`)
        assert.isFalse(rest.body.has_more)
        const all = [...first.body.data, ...rest.body.data]
        assert.sameMembers(all.map((r: any) => r.rating), [4, 1, 2])
        assert.deepStrictEqual(Object.keys(all[0]).sort(), ["created_at", "id", "rating", "text", "updated_at"], "no reviewer id")
        assertError(yield* request("GET", `/api/market/agents/${identifier}/reviews?after=rev_unknown`), 404, "not_found")

        const deleted = yield* request("DELETE", `/api/market/agents/${identifier}/review`, { token: reader.token })
        assert.strictEqual(deleted.status, 200, deleted.text)
        assertError(yield* request("DELETE", `/api/market/agents/${identifier}/review`, { token: reader.token }), 404, "not_found")
        assert.deepStrictEqual((yield* request("GET", `/api/market/agents/${identifier}`)).body.rating, { average: 1.5, count: 2 })
      }))

    it.effect("icons: drawn from the name until the creator uploads a PNG, JPEG or WebP of at most 256 KB (never SVG)", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const identifier = yield* liveAgent(owner.token, { name: "Tax Helper <b>" })
        const card = (yield* request("GET", `/api/market/agents/${identifier}`)).body
        assert.match(card.icon_url, new RegExp(`^/api/market/agents/${identifier}/icon\\?v=g`))
        const drawn = yield* request("GET", card.icon_url)
        assert.strictEqual(drawn.status, 200, drawn.text)
        assert.strictEqual(drawn.headers.get("content-type"), "image/svg+xml")
        assert.strictEqual(drawn.headers.get("x-content-type-options"), "nosniff")
        assert.include(drawn.headers.get("cache-control") ?? "", "max-age=86400")
        assert.include(drawn.text, ">TH<", "the initials")
        assert.strictEqual((yield* request("GET", card.icon_url)).text, drawn.text, "the same every time")
        const revalidated = yield* request("GET", card.icon_url, { headers: { "if-none-match": drawn.headers.get("etag")! } })
        assert.strictEqual(revalidated.status, 304)

        const put = (token: string, image: string) => request("PUT", `/v1/agents/${identifier}/icon`, { token, body: { image } })
        const svg = Buffer.from("<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>").toString("base64")
        assertError(yield* put(owner.token, svg), 415, "unsupported_media_type")
        assertError(yield* put(owner.token, Buffer.from("GIF89a......").toString("base64")), 415, "unsupported_media_type")
        const big = Buffer.concat([PNG, Buffer.alloc(256 * 1024)]).toString("base64")
        assertError(yield* put(owner.token, big), 413, "payload_too_large")
        assertError(yield* put(owner.token, "not base64!"), 400, "invalid_request")
        const stranger = yield* newUser
        assertError(yield* put(stranger.token, PNG.toString("base64")), 403, "forbidden")

        const uploaded = yield* put(owner.token, `data:image/png;base64,${PNG.toString("base64")}`)
        assert.strictEqual(uploaded.status, 200, uploaded.text)
        assert.deepInclude(uploaded.body, { content_type: "image/png", bytes: PNG.length })
        const listed = (yield* request("GET", `/api/market/agents/${identifier}`)).body
        assert.notStrictEqual(listed.icon_url, card.icon_url, "a new icon, a new URL")
        const served = yield* request("GET", listed.icon_url)
        assert.strictEqual(served.headers.get("content-type"), "image/png")
        assert.strictEqual(served.headers.get("x-content-type-options"), "nosniff")
        assert.strictEqual(Number(served.headers.get("content-length")), PNG.length)

        const webp = yield* put(owner.token, WEBP.toString("base64"))
        assert.strictEqual(webp.body.content_type, "image/webp")
        const removed = yield* request("DELETE", `/v1/agents/${identifier}/icon`, { token: owner.token })
        assert.strictEqual(removed.status, 200, removed.text)
        const back = yield* request("GET", `/api/market/agents/${identifier}/icon`)
        assert.strictEqual(back.headers.get("content-type"), "image/svg+xml")
        assertError(yield* request("GET", "/api/market/agents/no-such-agent/icon"), 404, "not_found")
      }))

    it.effect("featured (operator only), the front page's sections, and creator pages", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const word = uniqueWord()
        const identifier = yield* liveAgent(owner.token, { name: `Star ${word}`, category: "design" })
        const other = yield* newUser
        assertError(yield* request("POST", `/api/admin/agents/${identifier}/feature`, { token: other.token }), 404, "not_found")
        const operator = (yield* loginWithSms(OPERATOR)).token
        const featured = yield* request("POST", `/api/admin/agents/${identifier}/feature`, { token: operator })
        assert.deepStrictEqual(featured.body, { identifier, featured: true })
        assertError(yield* request("POST", "/api/admin/agents/no-such-agent/feature", { token: operator }), 404, "not_found")

        const front = yield* request("GET", "/api/market/front")
        assert.strictEqual(front.status, 200, front.text)
        assert.include(identifiers({ body: { data: front.body.featured } }), identifier)
        const design = front.body.sections.find((s: any) => s.category === "design")
        assert.isAtLeast(design.total, 1)
        assert.isAtMost(design.data.length, 6)
        assert.isTrue(front.body.sections.every((s: any) => s.total > 0))
        assert.deepStrictEqual(identifiers(yield* browse({ keyword: word, featured: "true" })), [identifier])

        yield* request("POST", `/api/admin/agents/${identifier}/unfeature`, { token: operator })
        assert.deepStrictEqual(identifiers(yield* browse({ keyword: word, featured: "true" })), [])

        // A creator page exists for an approved creator only.
        assertError(yield* request("GET", `/api/market/creators/${owner.userId}`), 404, "not_found")
        const applied = yield* request("POST", "/api/creator/apply", {
          token: owner.token,
          body: { displayName: "Ada Studio", bio: "Experts for designers.", accountType: "individual", email: "ada@example.com" }
        })
        assert.strictEqual(applied.status, 201, applied.text)
        yield* request("POST", `/api/admin/applications/${owner.userId}/approve`, { token: operator })
        const page = yield* request("GET", `/api/market/creators/${owner.userId}`)
        assert.strictEqual(page.status, 200, page.text)
        assert.deepInclude(page.body, { id: owner.userId, display_name: "Ada Studio", bio: "Experts for designers." })
        assert.deepStrictEqual(identifiers({ body: { data: page.body.experts } }), [identifier])
        assert.notInclude(page.text, "ada@example.com")
        const card = (yield* request("GET", `/api/market/agents/${identifier}`)).body
        assert.deepStrictEqual(card.creator, { id: owner.userId, display_name: "Ada Studio" })
      }))
  })
})
