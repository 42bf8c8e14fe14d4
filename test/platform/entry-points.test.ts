import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"

/**
 * `run*` only at entry points (issue 45 item 1, DESIGN.md): an effect is run from outside Effect only where plain code
 * calls in, and each such place is named here with why (docs/architecture.md, "Where effects are run"). Work that
 * belongs to a service or an entity is forked in its scope (`Effect.forkIn`, `FiberHandle`, `FiberSet`), not run.
 * A new `Runtime.run*` or `Effect.run*` in src/ fails this test until it is one of them.
 */
const ENTRY_POINTS: Record<string, { readonly count: number; readonly why: string }> = {
  "src/main.ts": { count: -1, why: "the process" },
  "src/platform/Config.ts": { count: 1, why: "Config.mapOrFail takes a function: a pure, synchronous provider of one value is loaded in it" },
  "src/platform/sse/Sse.ts": { count: 2, why: "Node's `close` callback of a held response closes the stream's scope" },
  "src/runtime/sandbox/WasmSandbox.ts": { count: 1, why: "a guest process's `exit` callback and its memory watch's timer" },
  "src/mcp/Http.ts": { count: 1, why: "the MCP SDK calls a tool through a promise" }
}

const sources = (dir: string): Array<string> =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = Path.join(dir, entry.name)
    return entry.isDirectory() ? sources(path) : /\.tsx?$/.test(entry.name) ? [path] : []
  })

describe("entry points", () => {
  it("no Runtime.run* or Effect.run* in src/ outside the named entry points", () => {
    const found = new Map<string, number>()
    for (const file of sources("src")) {
      const code = Fs.readFileSync(file, "utf8")
        .replace(/\/\*[\s\S]*?\*\//g, "")
        .replace(/^\s*\/\/.*$/gm, "")
      const calls = code.match(/\b(Runtime|Effect)\.run(Fork|Sync|Promise|Callback|SyncExit|PromiseExit)\b/g) ?? []
      if (calls.length > 0) found.set(file.split(Path.sep).join("/"), calls.length)
    }
    for (const [file, count] of found) {
      const allowed = ENTRY_POINTS[file]
      assert.isDefined(allowed, `${file} runs effects (${count}×) and is not an entry point`)
      if (allowed!.count >= 0) assert.strictEqual(count, allowed!.count, `${file}: ${count} run* calls, ${allowed!.count} named`)
    }
  })
})
