import { assert, describe, layer } from "@effect/vitest"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { Deferred, Effect } from "effect"
import { balanceOf, createAgent, getAgent, liveAgent } from "../agents/agents-support.js"
import { micros } from "../billing/billing-support.js"
import { createApiKey, request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { eventTypes, findSuggestion, runOnce, runRow, versionConfig } from "../evolution/evolution-support.js"
import { call, callOk, connect, ENV, failed, LIVE, newUser, ok } from "./mcp-support.js"

/**
 * The six run-engine tools through the official MCP client: test_expert (rule 7: really runs and bills),
 * start_distillation and continue_distillation (rule 6), and the self-evolution tools (rule 9: accepting takes
 * effect at once, without review). Every effect is checked where it shows: the wallet, the `runs` table, the agent
 * through `/v1`, and runs by other users.
 */

const signedIn = Effect.gen(function*() {
  const user = yield* newUser
  const client = yield* connect({ bearer: user.token })
  return { ...user, client }
})

const TEA = `# Japanese tea brewing

Japanese green tea is brewed with water well below boiling. Sencha tastes best at about 70 to 80 degrees Celsius.

## Gyokuro

Gyokuro is shaded before harvest, which makes it sweet. Brew gyokuro at 50 to 60 degrees for two minutes.

- Use soft water for a clean taste.
- Warm the teapot first.
`

const MATCHA = `Matcha is powdered green tea whisked with a bamboo whisk.
It is prepared with water at about 80 degrees Celsius.
`

const materials = [
  { filename: "tea.md", content: TEA },
  { filename: "matcha.txt", content: MATCHA }
]

/** Spends `micros` exactly: the balance after is the balance before minus what the tool said it charged. */
const assertCharged = (before: number, after: number, charged: number) => {
  assert.isAbove(charged, 0)
  assert.strictEqual(micros(before) - micros(after), micros(charged), `charged ${charged}: ${before} -> ${after}`)
}

const ENGINE_ARGS = (identifier: string): Record<string, Record<string, unknown>> => ({
  test_expert: { identifier, message: "hello" },
  start_distillation: { topic: "Tea", materials: [{ filename: "tea.md", content: "# Tea\nGreen and black." }] },
  continue_distillation: { sessionId: "dst_123", message: "name: X" },
  list_evolution_suggestions: { identifier },
  accept_evolution: { suggestionId: "sug_123" },
  get_evolution_stats: { identifier }
})

const errorTypeOf = (result: CallToolResult) => (result._meta as any)["atrium/error"].type as string


describe("mcp engine tools", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.scoped("without identity the six tools are tool errors and nothing runs or is billed", () =>
      Effect.gen(function*() {
        const owner = yield* signedIn
        const agent = yield* createAgent(owner.token, { name: "Anon target" })
        const server = yield* TestServer
        const counts = Effect.forEach(["runs", "distillations", "evolution_suggestions"], (table) =>
          Effect.map(server.query(`SELECT count(*)::int AS n FROM ${table}`), (rows) => Number(rows[0]!.n)))
        const before = yield* counts
        const balance = yield* balanceOf(owner.token)
        const anonymous = yield* connect()
        for (const [name, args] of Object.entries(ENGINE_ARGS(agent.identifier))) {
          const result = yield* call(anonymous, name, args)
          failed(result, "Sign in required")
          assert.strictEqual(errorTypeOf(result), "unauthorized", name)
        }
        assert.deepStrictEqual(yield* counts, before)
        assert.strictEqual(yield* balanceOf(owner.token), balance)
      }))

    it.scoped("rule 7: test_expert runs the owner's draft through the run engine and bills the wallet", () =>
      Effect.gen(function*() {
        const me = yield* signedIn
        const agent = yield* createAgent(me.token, { name: "Echo", instructions: "Answer briefly." })
        const before = yield* balanceOf(me.token)

        const result = yield* callOk(me.client, "test_expert", { identifier: agent.identifier, message: "hello there" })
        assert.strictEqual(result.status, "completed")
        assert.strictEqual(result.output, "You said: hello there")
        assert.strictEqual(result.identifier, agent.identifier)
        assert.isNull(result.version, "the owner runs the draft")
        assert.match(result.runId, /^run_/)
        assert.notProperty(result, "error")
        assert.isAbove(result.usage.input_tokens, 0)
        assert.isAbove(result.usage.output_tokens, 0)
        assert.includeMembers(result.events.map((e: any) => e.type), ["run.created", "run.in_progress", "usage.token", "run.completed"])
        const after = yield* balanceOf(me.token)
        assertCharged(before, after, result.creditsCharged)

        // It is a real, recorded run of this agent, paid by the caller.
        const row = yield* runRow(result.runId)
        assert.strictEqual(row.status, "completed")
        assert.strictEqual(row.payer_id, me.userId)
        assert.isNull(row.agent_version)
        assert.strictEqual(micros(Number(row.credits) / 1_000_000), micros(result.creditsCharged))

        // A failing run reports its code.
        const failing = yield* callOk(me.client, "test_expert", { identifier: agent.identifier, message: "/fail boom" })
        assert.strictEqual(failing.status, "failed")
        assert.strictEqual(failing.error.code, "model_error")
        assert.include(failing.error.message, "boom")
        assert.strictEqual(failing.output, "")
        assert.include(failing.events.map((e: any) => e.type), "run.failed")
        assert.strictEqual((yield* runRow(failing.runId)).failure_code, "model_error")
        assert.strictEqual(micros(yield* balanceOf(me.token)), micros(after) - micros(failing.creditsCharged))

        // The draft is what runs: a tool added to the draft works at once, before any publishing.
        const patched = yield* request("PATCH", `/v1/agents/${agent.identifier}`, {
          token: me.token,
          body: { tools: [{ name: "calculator", permission: "allow" }] }
        })
        assert.strictEqual(patched.status, 200, patched.text)
        const tool = yield* callOk(me.client, "test_expert", { identifier: agent.identifier, message: '/tool calculator {"expression":"6*7"}' })
        assert.strictEqual(tool.status, "completed")
        assert.include(tool.output, "42")
        assert.include(tool.events.map((e: any) => e.type), "tool_call.completed")
      }))

    it.scoped("test_expert: others' drafts are absent, others' published agents run their published version", () =>
      Effect.gen(function*() {
        const me = yield* signedIn
        const other = yield* newUser
        const draft = yield* createAgent(other.token, { name: "Hidden" })
        const missing = yield* call(me.client, "test_expert", { identifier: draft.identifier, message: "hi" })
        failed(missing, `No agent ${draft.identifier}`)
        assert.strictEqual(errorTypeOf(missing), "not_found")
        failed(yield* call(me.client, "test_expert", { identifier: "no-such-agent", message: "hi" }), "No agent")

        const live = yield* liveAgent(other.token, { name: "Public echo" })
        const ownerBalance = yield* balanceOf(other.token)
        const before = yield* balanceOf(me.token)
        const result = yield* callOk(me.client, "test_expert", { identifier: live, message: "ping" })
        assert.strictEqual(result.status, "completed")
        assert.strictEqual(result.version, 1)
        assertCharged(before, yield* balanceOf(me.token), result.creditsCharged)
        assert.strictEqual(yield* balanceOf(other.token), ownerBalance, "the caller pays, not the owner")
      }))

    it.scoped("test_expert with an API key bills the key's owner; open_expert_chat stays free", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const key = yield* createApiKey(user.token)
        const client = yield* connect({ bearer: key.key })
        const agent = yield* createAgent(user.token, { name: "Keyed echo" })
        const before = yield* balanceOf(user.token)
        const result = yield* callOk(client, "test_expert", { identifier: agent.identifier, message: "via key" })
        assert.strictEqual(result.output, "You said: via key")
        const afterRun = yield* balanceOf(user.token)
        assertCharged(before, afterRun, result.creditsCharged)
        assert.strictEqual((yield* runRow(result.runId)).payer_id, user.userId)

        const chat = yield* callOk(client, "open_expert_chat", { identifier: agent.identifier })
        assert.match(chat.url, new RegExp(`/chat/${agent.identifier}$`))
        assert.strictEqual(yield* balanceOf(user.token), afterRun, "open_expert_chat charges nothing")
      }))

    it.scoped("rule 6: start_distillation drafts an agent from the materials and bills the run", () =>
      Effect.gen(function*() {
        const me = yield* signedIn
        const before = yield* balanceOf(me.token)
        const started = yield* callOk(me.client, "start_distillation", { topic: "Japanese tea brewing", materials })
        assert.match(started.sessionId, /^dst_[A-Za-z0-9]{20}$/)
        assert.deepStrictEqual(started.draft.name, "Japanese Tea Brewing Expert")
        assert.strictEqual(started.draft.category, "lifestyle")
        assert.include(started.draft.description, "tea.md")
        assert.include(started.draft.description, "matcha.txt")
        // Grounded: headings and key sentences of the files, each cited.
        const instructions: string = started.draft.instructions
        assert.include(instructions, "### tea.md")
        assert.include(instructions, "Gyokuro")
        assert.include(instructions, "Sencha tastes best at about 70 to 80 degrees Celsius. (tea.md)")
        assert.include(instructions, "Matcha is powdered green tea whisked with a bamboo whisk. (matcha.txt)")
        assert.include(started.answer, "tea.md")
        assert.include(started.answer, "create")
        assert.isNull(started.agent)
        assert.deepStrictEqual(started.materials, [
          { filename: "tea.md", bytes: Buffer.byteLength(TEA) },
          { filename: "matcha.txt", bytes: Buffer.byteLength(MATCHA) }
        ])

        // One run of the platform's distiller, recorded and paid by the caller.
        assert.strictEqual(started.run.status, "completed")
        const row = yield* runRow(started.run.id)
        assert.isNull(row.agent_id)
        assert.strictEqual(row.payer_id, me.userId)
        assertCharged(before, yield* balanceOf(me.token), started.run.credits_charged)

        // Nothing is created until asked.
        assert.deepStrictEqual((yield* callOk(me.client, "list_my_experts")).data, [])
      }))

    it.scoped("rule 6: continue_distillation applies requested changes and creates the agent draft on request", () =>
      Effect.gen(function*() {
        const me = yield* signedIn
        const started = yield* callOk(me.client, "start_distillation", { topic: "Japanese tea brewing", materials })
        const sessionId = started.sessionId

        const renamed = yield* callOk(me.client, "continue_distillation", {
          sessionId,
          message: "name: Sencha Sensei\ncategory: education\nAlways mention the water temperature."
        })
        assert.strictEqual(renamed.sessionId, sessionId)
        assert.strictEqual(renamed.draft.name, "Sencha Sensei")
        assert.strictEqual(renamed.draft.category, "education")
        assert.include(renamed.draft.instructions, "## Notes from the creator\n- Always mention the water temperature.")
        assert.include(renamed.answer, "name → Sencha Sensei")
        assert.isNull(renamed.agent)
        assert.strictEqual(renamed.turns, 2)

        // A request that cannot be done is said in the answer, and changes nothing.
        const refused = yield* callOk(me.client, "continue_distillation", { sessionId, message: "category: astrology" })
        assert.include(refused.answer, "not a category")
        assert.strictEqual(refused.draft.category, "education")

        // Someone else cannot continue it: it is not found for them.
        const other = yield* signedIn
        const theirs = yield* call(other.client, "continue_distillation", { sessionId, message: "name: Stolen" })
        failed(theirs, "not found")
        assert.strictEqual(errorTypeOf(theirs), "not_found")
        failed(yield* call(me.client, "continue_distillation", { sessionId: "dst_nope", message: "hi" }), "not found")

        // "create" creates the agent draft for the caller, with the distilled instructions.
        const created = yield* callOk(me.client, "continue_distillation", { sessionId, message: "create" })
        assert.deepStrictEqual(Object.keys(created.agent).sort(), ["created", "identifier"])
        assert.isTrue(created.agent.created)
        const identifier: string = created.agent.identifier
        assert.match(identifier, /^sencha-sensei-[a-z0-9]{6}$/)
        assert.include(created.answer, identifier)
        const agent = (yield* getAgent(me.token, identifier)).body
        assert.deepInclude(agent, { name: "Sencha Sensei", category: "education", status: "draft" })
        assert.include(agent.instructions, "(tea.md)")
        assert.include(agent.instructions, "Always mention the water temperature.")
        assert.strictEqual(agent.description, created.draft.description)
        assert.deepStrictEqual((yield* callOk(me.client, "list_my_experts")).data.map((a: any) => a.identifier), [identifier])

        // Later changes go to the same agent when asked again.
        const again = yield* callOk(me.client, "continue_distillation", { sessionId, message: "description: Brews tea.\ncreate" })
        assert.deepStrictEqual(again.agent, { identifier, created: false })
        assert.strictEqual((yield* getAgent(me.token, identifier)).body.description, "Brews tea.")
        assert.strictEqual((yield* callOk(me.client, "list_my_experts")).data.length, 1)
        const transcript = yield* request("GET", `/v1/distillations/${sessionId}`, { token: me.token })
        assert.strictEqual(transcript.status, 200, transcript.text)
        assert.strictEqual(transcript.body.messages.length, 10)
        assert.deepStrictEqual(transcript.body.messages.map((m: any) => m.role).slice(0, 2), ["user", "assistant"])
      }))

    it.scoped("distillation limits are clear tool errors, and nothing is run or stored", () =>
      Effect.gen(function*() {
        const me = yield* signedIn
        const before = yield* balanceOf(me.token)
        const file = (filename: string, content = "Some text about tea.") => ({ filename, content })
        const cases: Array<[unknown, string]> = [
          [[], "at least one file"],
          [Array.from({ length: 21 }, (_, i) => file(`f${i}.md`)), "at most 20 files"],
          [[file("big.md", "x".repeat(200_001))], "at most 200000 bytes"],
          [[file("ok.md"), file("", "text")], "materials[1].filename must be 1-200 characters"],
          [[file("n".repeat(201))], "filename must be 1-200 characters"],
          [[file("empty.md", "  \n ")], "content is empty"],
          [Array.from({ length: 5 }, (_, i) => file(`p${i}.md`, "y".repeat(200_000))).concat([file("last.md", "z".repeat(1000))]), "at most 1000000 bytes"]
        ]
        for (const [list, message] of cases) {
          const result = yield* call(me.client, "start_distillation", { topic: "Tea", materials: list })
          failed(result, message)
          assert.strictEqual(errorTypeOf(result), "invalid_request")
        }
        // At the limits exactly, it works.
        const atLimit = yield* callOk(me.client, "start_distillation", {
          topic: "Tea",
          materials: [file("a".repeat(200), "w ".repeat(100_000))]
        })
        assert.match(atLimit.sessionId, /^dst_/)
        const server = yield* TestServer
        const stored = yield* server.query(`SELECT count(*)::int AS n FROM distillations WHERE owner_id = '${me.userId}'`)
        assert.strictEqual(Number(stored[0]!.n), 1)
        assertCharged(before, yield* balanceOf(me.token), atLimit.run.credits_charged)
      }))

    it.scoped("one message at a time per distillation: a second one while the first runs is refused", () =>
      Effect.gen(function*() {
        const me = yield* signedIn
        const started = yield* callOk(me.client, "start_distillation", { topic: "Tea", materials })
        const second = yield* connect({ bearer: me.token })
        // The second message is sent once the first is under way: its first progress notification, not a pause.
        const underWay = yield* Deferred.make<void>()
        const [slow, busy] = yield* Effect.all([
          Effect.promise(() =>
            me.client.callTool({ name: "continue_distillation", arguments: { sessionId: started.sessionId, message: "/slow 15" } }, undefined, {
              onprogress: () => void Effect.runSync(Deferred.succeed(underWay, undefined)),
              resetTimeoutOnProgress: true
            })
          ).pipe(Effect.map((result) => ok(result as CallToolResult))),
          Deferred.await(underWay).pipe(
            Effect.zipRight(call(second, "continue_distillation", { sessionId: started.sessionId, message: "name: Fast" }))
          )
        ], { concurrency: "unbounded" })
        assert.strictEqual(slow.turns, 2)
        failed(busy, "answering another message")
        assert.strictEqual(errorTypeOf(busy), "distillation_busy")
        // Released afterwards.
        const next = yield* callOk(me.client, "continue_distillation", { sessionId: started.sessionId, message: "name: Fast" })
        assert.strictEqual(next.draft.name, "Fast")
      }))

    it.scoped("rule 9: accept_evolution takes effect at once, for other users too, without review", () =>
      Effect.gen(function*() {
        const owner = yield* signedIn
        const identifier = yield* liveAgent(owner.token, {
          name: "Counter",
          instructions: "Count things.",
          tools: [{ name: "calculator", permission: "deny" }]
        })
        const user = yield* newUser
        const denied = yield* runOnce(user.token, identifier, '/tool calculator {"expression":"2+3"}')
        assert.include(eventTypes(denied), "tool_call.denied")
        assert.notInclude(eventTypes(denied), "tool_call.completed")

        const list = yield* callOk(owner.client, "list_evolution_suggestions", { identifier })
        assert.strictEqual(list.identifier, identifier)
        const allow = findSuggestion(list, "allow_denied_tool", "calculator")
        const remove = findSuggestion(list, "remove_denied_tool", "calculator")
        assert.match(allow.id, /^sug_/)
        assert.deepStrictEqual(allow.change, { type: "set_tool_permission", tool: "calculator", permission: "allow" })
        assert.deepStrictEqual(remove.change, { type: "remove_tool", tool: "calculator" })
        assert.deepStrictEqual(allow.evidence, { runs_with_denials: 1, denied_calls: 1, runs: 1 })
        assert.include(allow.rationale, "1 tool call was denied in 1 run of 1")
        assert.strictEqual(allow.status, "pending")
        assert.strictEqual(allow.drafted_by, "template")
        // Listing again derives the same suggestions: same ids, no duplicates.
        const again = yield* callOk(owner.client, "list_evolution_suggestions", { identifier })
        assert.deepStrictEqual(again.data.map((s: any) => s.id).sort(), list.data.map((s: any) => s.id).sort())

        const accepted = yield* callOk(owner.client, "accept_evolution", { suggestionId: allow.id })
        assert.strictEqual(accepted.suggestion.status, "accepted")
        assert.strictEqual(accepted.agent.applied_version, 2)
        assert.strictEqual(accepted.agent.published_version, 2)
        assert.isFalse(accepted.already_accepted)

        // Right after: another user's run uses the tool; no review happened.
        const allowed = yield* runOnce(user.token, identifier, '/tool calculator {"expression":"2+3"}')
        assert.include(eventTypes(allowed), "tool_call.completed")
        assert.notInclude(eventTypes(allowed), "tool_call.denied")
        assert.include(allowed.output, "5")
        assert.strictEqual((yield* runRow(allowed.id)).agent_version, 2)
        const status = yield* callOk(owner.client, "get_submission_status", { identifier })
        assert.strictEqual(status.published_version, 2)
        assert.isNull(status.pending_submission)
        assert.strictEqual(status.latest_submission.version, 1, "no new submission: review was bypassed")
        // The draft has it too.
        assert.deepStrictEqual((yield* getAgent(owner.token, identifier)).body.tools, [{ name: "calculator", permission: "allow" }])

        // The alternative is dismissed; accepting again changes nothing.
        const after = yield* callOk(owner.client, "list_evolution_suggestions", { identifier })
        assert.strictEqual(findSuggestion(after, "remove_denied_tool", "calculator").status, "dismissed")
        assert.strictEqual(findSuggestion(after, "allow_denied_tool", "calculator").status, "accepted")
        const twice = yield* callOk(owner.client, "accept_evolution", { suggestionId: allow.id })
        assert.isTrue(twice.already_accepted)
        assert.strictEqual(twice.agent.published_version, 2)
        failed(yield* call(owner.client, "accept_evolution", { suggestionId: remove.id }), "dismissed")

        const stats = yield* callOk(owner.client, "get_evolution_stats", { identifier })
        assert.deepStrictEqual(stats.suggestions, { made: 2, pending: 0, accepted: 1, dismissed: 1 })
        assert.strictEqual(stats.runs.all.runs, 2)
        assert.deepInclude(stats.runs.before_last_accepted, { runs: 1, completed: 1, runs_with_denied_tools: 1, denied_tool_calls: 1 })
        assert.deepInclude(stats.runs.after_last_accepted, { runs: 1, completed: 1, runs_with_denied_tools: 0 })
        assert.isString(stats.last_accepted_at)
      }))

    it.scoped("rule 9: a failure suggestion changes the instructions of the draft and of the live version at once", () =>
      Effect.gen(function*() {
        const owner = yield* signedIn
        const identifier = yield* liveAgent(owner.token, { name: "Fragile", instructions: "Be kind." })
        const user = yield* newUser
        for (const message of ["/fail upstream broke", "/fail again", "fine"]) yield* runOnce(user.token, identifier, message)

        const list = yield* callOk(owner.client, "list_evolution_suggestions", { identifier })
        const failures = findSuggestion(list, "failed_runs", "model_error")
        assert.deepStrictEqual(failures.evidence, { failed_runs: 2, runs: 3 })
        assert.include(failures.rationale, "2 runs of 3 failed with model_error")
        assert.strictEqual(failures.change.type, "append_instructions")
        const text: string = failures.change.text

        const accepted = yield* callOk(owner.client, "accept_evolution", { suggestionId: failures.id })
        assert.strictEqual(accepted.agent.published_version, 2)
        assert.strictEqual((yield* getAgent(owner.token, identifier)).body.instructions, `Be kind.\n\n${text}`)
        assert.strictEqual((yield* versionConfig(identifier, 2)).instructions, `Be kind.\n\n${text}`)
        assert.strictEqual((yield* versionConfig(identifier, 1)).instructions, "Be kind.", "versions stay immutable")
        // Others run version 2 at once.
        const next = yield* runOnce(user.token, identifier, "hello")
        assert.strictEqual((yield* runRow(next.id)).agent_version, 2)

        // The same runs do not suggest it again, nor does a new failure of that code (its change is in place).
        const quiet = yield* callOk(owner.client, "list_evolution_suggestions", { identifier })
        assert.deepStrictEqual(quiet.data.filter((s: any) => s.status === "pending"), [])
        // A failure of another kind after acceptance is a new suggestion.
        const broke = yield* runOnce(user.token, identifier, "hello", { budget: 0.000001 })
        assert.strictEqual(broke.error?.code, "budget_exhausted")
        const fresh = yield* callOk(owner.client, "list_evolution_suggestions", { identifier })
        const reopened = fresh.data.filter((s: any) => s.status === "pending")
        assert.strictEqual(reopened.length, 1)
        assert.deepInclude(reopened[0], { kind: "failed_runs", subject: "budget_exhausted", title: "Answer more economically" })
        assert.deepStrictEqual(reopened[0].evidence, { failed_runs: 1, runs: 5 })

        const stats = yield* callOk(owner.client, "get_evolution_stats", { identifier })
        assert.deepInclude(stats.runs.before_last_accepted, { runs: 3, failed: 2, failure_rate: 0.6667 })
        assert.deepInclude(stats.runs.after_last_accepted, { runs: 2, failed: 1, failure_rate: 0.5 })
        assert.strictEqual(stats.failure_rate_change, -0.1667)
      }))

    it.scoped("evolution is the owner's: others get not_found or forbidden, never the suggestions", () =>
      Effect.gen(function*() {
        const owner = yield* signedIn
        const identifier = yield* liveAgent(owner.token, { name: "Mine", tools: [{ name: "get_time", permission: "deny" }] })
        const draft = yield* createAgent(owner.token, { name: "My draft" })
        const user = yield* signedIn
        yield* runOnce(user.token, identifier, "/tool get_time {}")
        const list = yield* callOk(owner.client, "list_evolution_suggestions", { identifier })
        const suggestion = findSuggestion(list, "allow_denied_tool", "get_time")

        const forbidden = yield* call(user.client, "list_evolution_suggestions", { identifier })
        failed(forbidden, "Only the creator")
        assert.strictEqual(errorTypeOf(forbidden), "forbidden")
        failed(yield* call(user.client, "get_evolution_stats", { identifier }), "Only the creator")
        const hidden = yield* call(user.client, "list_evolution_suggestions", { identifier: draft.identifier })
        assert.strictEqual(errorTypeOf(hidden), "not_found")
        const notTheirs = yield* call(user.client, "accept_evolution", { suggestionId: suggestion.id })
        failed(notTheirs, `No suggestion ${suggestion.id}`)
        assert.strictEqual(errorTypeOf(notTheirs), "not_found")
        failed(yield* call(owner.client, "accept_evolution", { suggestionId: "sug_missing" }), "No suggestion")
        // Still pending and unapplied.
        const still = yield* callOk(owner.client, "list_evolution_suggestions", { identifier })
        assert.strictEqual(findSuggestion(still, "allow_denied_tool", "get_time").status, "pending")
        assert.strictEqual((yield* callOk(owner.client, "get_submission_status", { identifier })).published_version, 1)
      }))
  })

  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.scoped("with a progressToken the slow tools send notifications/progress, as they go", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const client = yield* connect({ bearer: user.token })
        const withProgress = (name: string, args: Record<string, unknown>) =>
          Effect.promise(async () => {
            const updates: Array<{ progress: number; message?: string | undefined }> = []
            const result = await client.callTool({ name, arguments: args }, undefined, {
              onprogress: (update) => void updates.push(update),
              resetTimeoutOnProgress: true
            }) as CallToolResult
            return { value: ok(result), updates }
          })
        const started = yield* withProgress("start_distillation", { topic: "Tea", materials })
        assert.match(started.value.sessionId, /^dst_/)
        assert.includeMembers(started.updates.map((u) => u.message), ["Run started", "Thinking (model call 1)", "Run completed"])
        started.updates.forEach((u, i) => i > 0 && assert.isAbove(u.progress, started.updates[i - 1]!.progress))

        const next = yield* withProgress("continue_distillation", { sessionId: started.value.sessionId, message: "name: Tea Pal" })
        assert.strictEqual(next.value.draft.name, "Tea Pal")
        assert.include(next.updates.map((u) => u.message), "Run completed")

        const agent = yield* createAgent(user.token, { name: "Prog", tools: [{ name: "calculator", permission: "allow" }] })
        const tested = yield* withProgress("test_expert", { identifier: agent.identifier, message: '/tool calculator {"expression":"1+2"}' })
        assert.strictEqual(tested.value.status, "completed")
        assert.includeMembers(tested.updates.map((u) => u.message), [
          "Thinking (model call 1)",
          "Running tool calculator",
          "Thinking (model call 2)"
        ])
        // While the run goes on, not all at the end: the builtin model's longest answer (1000 slow increments, far
        // longer than the test's timeout) sends its first update while the call is still pending; the call is then
        // cancelled. Notifications held back until the end would never arrive in time.
        const controller = new AbortController()
        let settled = false
        const first = yield* Effect.promise(() =>
          new Promise<{ progress: number; message?: string | undefined }>((resolve) => {
            client.callTool({ name: "test_expert", arguments: { identifier: agent.identifier, message: "/slow 1000" } }, undefined, {
              onprogress: resolve,
              signal: controller.signal,
              resetTimeoutOnProgress: true
            }).then(() => void (settled = true), () => void (settled = true))
          })
        )
        assert.isFalse(settled, "the first update came before the call's answer")
        assert.isString(first.message)
        controller.abort()

        // Without a token: a plain JSON answer. With one: an event stream carrying the notifications and the result.
        const raw = (meta: Record<string, unknown>) =>
          Effect.flatMap(TestServer, (server) =>
            Effect.promise(async () => {
              const response = await fetch(`${server.url}/mcp`, {
                method: "POST",
                headers: {
                  "content-type": "application/json",
                  accept: "application/json, text/event-stream",
                  authorization: `Bearer ${user.token}`
                },
                body: JSON.stringify({
                  jsonrpc: "2.0",
                  id: 1,
                  method: "tools/call",
                  params: { name: "test_expert", arguments: { identifier: agent.identifier, message: "hi" }, ...meta }
                })
              })
              return { type: response.headers.get("content-type") ?? "", text: await response.text() }
            }))
        const json = yield* raw({})
        assert.include(json.type, "application/json")
        assert.notInclude(json.text, "notifications/progress")
        const sse = yield* raw({ _meta: { progressToken: "p1" } })
        assert.include(sse.type, "text/event-stream")
        assert.include(sse.text, "notifications/progress")
        assert.include(sse.text, "You said: hi")
      }))
  })

  // Short limits: a run past them is stopped, answered as such, and recorded as cancelled. Approvals expire quickly.
  layer(
    TestServer.layer({ ...ENV, DISTILLATION_TIMEOUT: "1 second", TEST_EXPERT_TIMEOUT: "3 seconds", APPROVAL_TIMEOUT: "1 second" }),
    LIVE
  )((it) => {
    it.scoped("timeouts: test_expert answers cancelled, a distillation message a tool error; both runs are recorded", () =>
      Effect.gen(function*() {
        const me = yield* signedIn
        const agent = yield* createAgent(me.token, { name: "Slowpoke" })
        const slow = yield* callOk(me.client, "test_expert", { identifier: agent.identifier, message: "/slow 60" })
        assert.strictEqual(slow.status, "cancelled")
        assert.strictEqual(slow.error.code, "timeout")
        assert.include(slow.output, "chunk 1")
        assert.notInclude(slow.output, "chunk 60")
        const row = yield* runRow(slow.runId)
        assert.strictEqual(row.status, "cancelled")

        const started = yield* callOk(me.client, "start_distillation", { topic: "Tea", materials })
        const timedOut = yield* call(me.client, "continue_distillation", { sessionId: started.sessionId, message: "/slow 40" })
        failed(timedOut, "did not answer within")
        assert.strictEqual(errorTypeOf(timedOut), "distillation_timed_out")
        // The conversation is free again and unchanged by the lost message.
        const next = yield* callOk(me.client, "continue_distillation", { sessionId: started.sessionId, message: "name: After" })
        assert.strictEqual(next.turns, 2)
        assert.strictEqual(next.draft.name, "After")
        assert.notInclude(next.draft.instructions, "/slow")

        // The cancelled run is evidence for evolution: interrupted runs suggest shorter answers.
        const list = yield* callOk(me.client, "list_evolution_suggestions", { identifier: agent.identifier })
        const shorter = findSuggestion(list, "interrupted_runs", "")
        assert.deepStrictEqual(shorter.evidence, { interrupted_runs: 1, runs: 1 })
        assert.strictEqual(shorter.change.type, "append_instructions")
      }))

    it.scoped("a draft-only agent evolves its draft: an `ask` tool nobody approved becomes allowed", () =>
      Effect.gen(function*() {
        const owner = yield* signedIn
        const own = yield* createAgent(owner.token, { name: "Drafty", tools: [{ name: "calculator", permission: "ask" }] })
        // Nobody answers the approval: it expires (APPROVAL_TIMEOUT) as a denial.
        const asked = yield* callOk(owner.client, "test_expert", { identifier: own.identifier, message: '/tool calculator {"expression":"1+1"}' })
        assert.include(asked.events.map((e: any) => e.type), "approval.required")
        assert.include(asked.events.map((e: any) => e.type), "tool_call.denied")
        const drafty = yield* callOk(owner.client, "list_evolution_suggestions", { identifier: own.identifier })
        const allowAsk = findSuggestion(drafty, "allow_denied_tool", "calculator")
        assert.include(allowAsk.rationale, "calculator is set to ask")
        const applied = yield* callOk(owner.client, "accept_evolution", { suggestionId: allowAsk.id })
        assert.isNull(applied.agent.applied_version)
        assert.isNull(applied.agent.published_version)
        assert.include(applied.message, "draft")
        assert.deepStrictEqual((yield* getAgent(owner.token, own.identifier)).body.tools, [{ name: "calculator", permission: "allow" }])
        const runs = yield* callOk(owner.client, "test_expert", { identifier: own.identifier, message: '/tool calculator {"expression":"1+1"}' })
        assert.include(runs.events.map((e: any) => e.type), "tool_call.completed")
        assert.notInclude(runs.events.map((e: any) => e.type), "approval.required")
      }))
  })
})

