import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { apiKeyOf, ENV, liveAgent, LIVE, newUser, resultOf, runAgent, toolDirective } from "../runs/runs-support.js"

/**
 * The authorization suite over the memory routes (issue 47 item 3): every route × 2 accounts × 2 end users × 2
 * experts. Each of the 8 cells writes secrets of its own (a block through PATCH, a fact through the expert's tool);
 * then every cell calls every route naming every expert, and must see only its own secrets, and delete only its own
 * facts. Both experts are published, so each account may use both (its own draft, the other's published version):
 * what keeps them apart is the partition, not a 404 for the expert. The count of cross reads must be 0.
 */

const MEMORY = { enabled: true, blocks: [{ label: "notes", description: "", limit: 200 }] }

interface Cell {
  readonly name: string
  readonly token: string
  readonly endUser: string
  readonly expert: string
  readonly secret: string
  factId: string
}

describe("security: memory authorization", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("every memory route × 2 accounts × 2 end users × 2 experts: 0 cross reads, 0 cross deletes", () =>
      Effect.gen(function*() {
        const accounts = [yield* newUser, yield* newUser]
        const keys = [yield* apiKeyOf(accounts[0]!), yield* apiKeyOf(accounts[1]!)]
        // Each account owns one expert; both are published, so both accounts can reach both.
        const experts = [
          yield* liveAgent(accounts[0]!.token, { name: `Mem A ${Math.random().toString(36).slice(2, 7)}`, memory: MEMORY }),
          yield* liveAgent(accounts[1]!.token, { name: `Mem B ${Math.random().toString(36).slice(2, 7)}`, memory: MEMORY })
        ]
        const cells: Array<Cell> = []
        for (const [a, key] of keys.entries()) {
          for (const endUser of ["eu-1", "eu-2"]) {
            for (const expert of experts) {
              const name = `acct${a}/${endUser}/${expert}`
              cells.push({ name, token: key, endUser, expert, secret: `secret-${a}-${endUser}-${expert}-${Math.random().toString(36).slice(2, 10)}`, factId: "" })
            }
          }
        }
        const headers = (cell: Cell) => ({ "x-end-user-id": cell.endUser })
        for (const cell of cells) {
          const patched = yield* request("PATCH", `/v1/memory/blocks/notes?agent=${cell.expert}`, {
            token: cell.token,
            headers: headers(cell),
            body: { value: cell.secret }
          })
          assert.strictEqual(patched.status, 200, `${cell.name}: ${patched.text}`)
          const fact = yield* runAgent({ token: cell.token, endUser: cell.endUser }, cell.expert, toolDirective("fact_add", { text: `fact ${cell.secret}` }))
          cell.factId = resultOf(fact).id
        }

        let crossReads = 0
        let calls = 0
        const leaks: Array<string> = []
        const check = (caller: Cell, route: string, text: string) => {
          calls++
          for (const other of cells) {
            if (other === caller) continue
            if (text.includes(other.secret) || text.includes(other.factId)) {
              crossReads++
              leaks.push(`${caller.name} ${route} saw ${other.name}`)
            }
          }
        }
        for (const own of cells) {
          {
            const caller = own
            const expert = own.expert
            const get = yield* request("GET", `/v1/memory?agent=${expert}`, { token: caller.token, headers: headers(caller) })
            assert.strictEqual(get.status, 200, get.text)
            check(own, "GET /v1/memory", get.text)
            assert.include(get.text, own.secret, `${own.name} sees its own block`)
            const exported = yield* request("GET", `/v1/memory/export?agent=${expert}`, { token: caller.token, headers: headers(caller) })
            assert.strictEqual(exported.status, 200, exported.text)
            check(own, "GET /v1/memory/export", exported.text)
            const searched = yield* runAgent({ token: caller.token, endUser: caller.endUser }, expert, toolDirective("memory_search", { query: "secret" }))
            check(own, "memory_search", JSON.stringify(resultOf(searched)))
            const read = yield* runAgent({ token: caller.token, endUser: caller.endUser }, expert, toolDirective("memory_read", { label: "notes" }))
            check(own, "memory_read", JSON.stringify(resultOf(read)))
            const context = yield* runAgent({ token: caller.token, endUser: caller.endUser }, expert, "/system")
            check(own, "context", JSON.stringify(context.events))
            // Deleting another cell's fact, with this cell's credentials: 404, and the fact is still there.
            for (const other of cells) {
              if (other === own) continue
              const deleted = yield* request("DELETE", `/v1/memory/facts/${other.factId}?agent=${expert}`, { token: caller.token, headers: headers(caller) })
              calls++
              if (deleted.status !== 404) {
                crossReads++
                leaks.push(`${own.name} deleted ${other.name}'s fact: ${deleted.status}`)
              }
            }
          }
        }
        // PATCH and DELETE everything of one cell's own change nothing of the others'.
        const first = cells[0]!
        const patched = yield* request("PATCH", `/v1/memory/blocks/notes?agent=${first.expert}`, { token: first.token, headers: headers(first), body: { value: "overwritten" } })
        assert.strictEqual(patched.status, 200)
        check(first, "PATCH /v1/memory/blocks", patched.text)
        const wiped = yield* request("DELETE", `/v1/memory?agent=${first.expert}`, { token: first.token, headers: headers(first) })
        assert.deepStrictEqual(wiped.body, { agent: first.expert, deleted: true, blocks: 1, facts: 1 })
        for (const other of cells.slice(1)) {
          const still = yield* request("GET", `/v1/memory?agent=${other.expert}`, { token: other.token, headers: headers(other) })
          assert.include(still.text, other.secret, `${other.name} kept its block`)
          assert.include(still.text, other.factId, `${other.name} kept its fact`)
        }
        // Logged in (no end user header) is a partition of its own too: the account's '' end user sees none of its keys' end users.
        for (const [a, account] of accounts.entries()) {
          for (const expert of experts) {
            const seen = yield* request("GET", `/v1/memory?agent=${expert}`, { token: account.token })
            calls++
            for (const cell of cells) {
              if (seen.text.includes(cell.secret) || seen.text.includes(cell.factId)) {
                crossReads++
                leaks.push(`login of account ${a} saw ${cell.name}`)
              }
            }
          }
        }
        console.log(`memory authorization: ${cells.length} cells, ${calls} cross checks, ${crossReads} cross reads`)
        assert.deepStrictEqual(leaks, [])
        assert.strictEqual(crossReads, 0)
      }), { timeout: 300_000 })
  })
})
