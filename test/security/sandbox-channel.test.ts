import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Option } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import type * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { CHANNEL_FD, encodeFrame, frameCap, HEADER_BYTES, makeFrameReader } from "../../src/runtime/sandbox/Channel.js"
import type { SandboxSettings } from "../../src/runtime/sandbox/Config.js"
import { checkContainment, type Containment } from "../../src/runtime/sandbox/Containment.js"
import type { SandboxLimits } from "../../src/runtime/sandbox/Sandbox.js"
import { GUEST_PROCESS_BYTES, make } from "../../src/runtime/sandbox/WasmSandbox.js"
import { pollPromise } from "../support/Poll.js"

/**
 * The host's side of the sandbox's channel (issue 42, Deliver 1; docs/tools.md "The channel"), against a guest that
 * broke its runtime. Pyodide and QuickJS cannot reach the channel's fd (their files are in memory), so the hostile
 * guest here is a process of its own speaking the frame format, started by the real `WasmSandbox` in place of
 * `guest.mjs`: it claims a 1 GiB frame, floods frames nobody asked for, sends what is not JSON, or answers past its
 * output limit. Each must end the call with the named failure and a killed guest, never a server that reads it all.
 * The frame reader itself is checked byte by byte: it never holds or parses more than the cap. And the real guest,
 * started as production starts it and spoken to frame by frame, keeps its own bound: its answer to a 50 MB result is
 * within the output limit, and the result is bounded before the guest makes a JavaScript string of it.
 */

const LIMITS: SandboxLimits = { timeMs: 20_000, memoryBytes: 64 * 1024 * 1024, outputBytes: 65_536, fileBytes: 1024 * 1024, maxFiles: 10 }

const SETTINGS = {
  packageIndex: Option.none(),
  livePerEndUser: 4,
  livePerAccount: 4,
  totalMemoryBytes: 4 * 1024 * 1024 * 1024,
  runningPerEndUser: 4,
  runningPerAccount: 4,
  uidBase: 200_000,
  uidCount: 1000,
  runningTotal: 4,
  queueMs: 10_000
} as unknown as SandboxSettings

/** A guest that speaks the protocol until the `run` request, then misbehaves as `mode` says. */
const HOSTILE_GUEST = `
import * as Fs from "node:fs"
import { Socket } from "node:net"
const [mode, dir] = process.argv.slice(-2)
Fs.writeFileSync(dir + "/pid", String(process.pid))
const channel = new Socket({ fd: 3, readable: true, writable: true })
channel.on("error", () => {})
const frame = (message) => {
  const body = Buffer.from(JSON.stringify(message))
  const header = Buffer.alloc(4)
  header.writeUInt32BE(body.length)
  return Buffer.concat([header, body])
}
const header = (length) => {
  const bytes = Buffer.alloc(4)
  bytes.writeUInt32BE(length)
  return bytes
}
let buffer = Buffer.alloc(0)
let first = true
channel.on("data", (chunk) => {
  buffer = Buffer.concat([buffer, chunk])
  while (buffer.length >= 4 && buffer.length >= 4 + buffer.readUInt32BE(0)) {
    const message = JSON.parse(buffer.subarray(4, 4 + buffer.readUInt32BE(0)).toString())
    buffer = buffer.subarray(4 + buffer.readUInt32BE(0))
    if (first) {
      first = false
      channel.write(frame({ type: "ready" }))
    } else if (message.type !== "run") channel.write(frame({ id: message.id, ok: true }))
    else answer(message)
  }
})
const answer = (message) => {
  if (mode === "oversized") {
    // A 1 GiB frame, and as much of it as the socket takes.
    channel.write(header(2 ** 30))
    const block = Buffer.alloc(1 << 20, 65)
    const pump = () => {
      while (channel.write(block)) {}
      channel.once("drain", pump)
    }
    pump()
  } else if (mode === "flood") {
    for (let i = 0; i < 10000; i++) channel.write(frame({ id: 1e9 + i, ok: true, stdout: "x".repeat(1000) }))
  } else if (mode === "garbage") {
    channel.write(Buffer.concat([header(9), Buffer.from("{not json")]))
  } else if (mode === "large-result") {
    // Within the channel's cap, past the output limit, and lying about its size.
    channel.write(frame({ id: message.id, ok: true, stdout: "", stderr: "", result: "A".repeat(300000), resultBytes: 0, files: [] }))
  } else if (mode === "large-stdout") {
    channel.write(frame({ id: message.id, ok: true, stdout: "x".repeat(100000), stderr: "", result: null, files: [] }))
  }
}
`

/** Runs one call in a sandbox whose guest is the hostile one in `mode`; the guest's pid with the outcome. */
const hostileRun = (mode: string) =>
  Effect.gen(function*() {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "atrium-channel-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true })))
    const script = Path.join(dir, "guest.mjs")
    Fs.writeFileSync(script, HOSTILE_GUEST)
    const containment: Containment = {
      runtimes: { pyodide: "", quickjs: "", pyodideIndex: "" },
      command: () => ({ file: process.execPath, args: [script, mode, dir] }),
      cgroups: undefined,
      ownUids: false,
      pidNamespace: false,
      layers: []
    }
    const sandbox = yield* make(LIMITS, SETTINGS, containment)
    const instance = yield* sandbox.create({ owner: { accountId: "acct", endUserId: "" }, env: {}, files: new Map(), packages: [], setupScript: "" })
    yield* Effect.addFinalizer(() => instance.close)
    const started = performance.now()
    const outcome = yield* Effect.either(instance.run("python", "1"))
    const ms = performance.now() - started
    const pid = Number(Fs.readFileSync(Path.join(dir, "pid"), "utf8"))
    return { outcome, ms, pid, alive: instance.alive() }
  })

/** Whether the process is gone (reaped), waiting up to 5 s for its exit to be seen. */
const gone = (pid: number) =>
  // Polled: the kill is real, its exit reaches this process's event loop.
  Effect.promise(() => pollPromise(() => !alive(pid), (gone) => gone, `process ${pid} gone`, { every: 20, within: 5_000 }).catch(() => false))

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

describe("the sandbox's channel against a guest that broke its runtime", () => {
  it.effect("frames cut anywhere arrive whole and in order", () =>
    Effect.sync(() => {
      const messages = [{ type: "ready" }, { id: 1, ok: true, stdout: "é".repeat(1000) }, { id: 2, result: [1, { a: null }] }]
      const bytes = Buffer.concat(messages.map(encodeFrame))
      for (const cut of [1, 3, 7, bytes.length]) {
        const seen: Array<unknown> = []
        const reader = makeFrameReader(1 << 20, { frame: (m) => seen.push(m), refuse: (p) => assert.fail(JSON.stringify(p)) })
        for (let at = 0; at < bytes.length; at += cut) reader.push(bytes.subarray(at, at + cut))
        assert.deepStrictEqual(seen, messages, `cut every ${cut} bytes`)
        assert.strictEqual(reader.held(), 0)
      }
    }))

  it.effect("a length over the cap is refused from its header: nothing of the frame is held or parsed", () =>
    Effect.sync(() => {
      const cap = 64 * 1024
      const refused: Array<unknown> = []
      const reader = makeFrameReader(cap, { frame: () => assert.fail("no frame"), refuse: (p) => refused.push(p) })
      const header = Buffer.alloc(HEADER_BYTES)
      header.writeUInt32BE(50_000_000)
      reader.push(header.subarray(0, 2))
      assert.isAtMost(reader.held(), HEADER_BYTES)
      reader.push(Buffer.concat([header.subarray(2), Buffer.alloc(1024 * 1024, 65)]))
      assert.deepStrictEqual(refused, [{ _tag: "Oversized", bytes: 50_000_000 }])
      for (let i = 0; i < 50; i++) reader.push(Buffer.alloc(1024 * 1024, 65))
      assert.strictEqual(reader.held(), 0, "what follows a refused header is dropped unread")
      assert.strictEqual(reader.parsed(), 0)
      assert.strictEqual(refused.length, 1)

      // The cap itself passes; one byte more does not.
      const exact = makeFrameReader(cap, { frame: () => {}, refuse: (p) => refused.push(p) })
      const body = Buffer.from(JSON.stringify("x".repeat(cap - 2)))
      assert.strictEqual(body.length, cap)
      exact.push(encodeFrame("x".repeat(cap - 2)))
      assert.strictEqual(exact.parsed(), cap)
      exact.push(encodeFrame("x".repeat(cap - 1)))
      assert.deepStrictEqual(refused.at(-1), { _tag: "Oversized", bytes: cap + 1 })
      assert.strictEqual(exact.parsed(), cap)
    }))

  it.effect("the cap holds the largest reply a guest within its limits sends", () =>
    Effect.sync(() => {
      // Output all control characters (six bytes each in JSON), the directory full of files, paths at their longest.
      const output = "\u0001".repeat(LIMITS.outputBytes / 2)
      const perFile = Math.floor(LIMITS.fileBytes / LIMITS.maxFiles)
      const files = Array.from({ length: LIMITS.maxFiles }, (_, i) => ({
        path: `${i}`.padEnd(200, "p"),
        base64: Buffer.alloc(perFile, 255).toString("base64")
      }))
      const reply = { id: 2 ** 31, ok: true, stdout: output, stderr: output, result: null, resultBytes: 0, files }
      assert.isAtMost(encodeFrame(reply).length - HEADER_BYTES, frameCap(LIMITS))
    }))

  it.scoped("a 1 GiB frame: the guest is killed at once and the call fails as output", () =>
    Effect.gen(function*() {
      const run = yield* hostileRun("oversized")
      assert.isTrue(Either.isLeft(run.outcome), JSON.stringify(run.outcome))
      if (Either.isRight(run.outcome)) return
      assert.strictEqual(run.outcome.left.reason, "output")
      assert.match(run.outcome.left.message, new RegExp(`answer of ${2 ** 30} bytes passed the channel's cap of ${frameCap(LIMITS)} bytes`))
      assert.isBelow(run.ms, LIMITS.timeMs / 2, "refused from the header, not after the wall time")
      assert.isFalse(run.alive)
      assert.isTrue(yield* gone(run.pid), "the guest process was killed")
    }), 60_000)

  it.scoped("frames nobody asked for: the guest is killed at the first", () =>
    Effect.gen(function*() {
      const run = yield* hostileRun("flood")
      assert.isTrue(Either.isLeft(run.outcome))
      if (Either.isRight(run.outcome)) return
      assert.strictEqual(run.outcome.left.reason, "unavailable")
      assert.match(run.outcome.left.message, /answered out of turn/)
      assert.isTrue(yield* gone(run.pid))
    }), 60_000)

  it.scoped("a frame that is not JSON: the guest is killed", () =>
    Effect.gen(function*() {
      const run = yield* hostileRun("garbage")
      assert.isTrue(Either.isLeft(run.outcome))
      if (Either.isRight(run.outcome)) return
      assert.match(run.outcome.left.message, /not readable/)
      assert.isTrue(yield* gone(run.pid))
    }), 60_000)

  it.scoped("a result past the output limit within the cap is clipped again on the host, whatever size it claims", () =>
    Effect.gen(function*() {
      const run = yield* hostileRun("large-result")
      assert.isTrue(Either.isRight(run.outcome), JSON.stringify(run.outcome).slice(0, 300))
      if (Either.isLeft(run.outcome)) return
      const result = run.outcome.right.result as string
      assert.match(result, /^A+…\[clipped: 300000 bytes, limit 65536\]$/)
      assert.strictEqual(Buffer.byteLength(result), LIMITS.outputBytes + Buffer.byteLength("…[clipped: 300000 bytes, limit 65536]"))
      assert.strictEqual(run.outcome.right.resultBytes, 300_000)

      const stdout = yield* hostileRun("large-stdout")
      assert.isTrue(Either.isLeft(stdout.outcome))
      if (Either.isRight(stdout.outcome)) return
      assert.strictEqual(stdout.outcome.left.reason, "output")
    }), 60_000)
})

const peakMb = (pid: number) => Number(/VmHWM:\s+(\d+) kB/.exec(Fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]) / 1024

describe("the real guest keeps its own bound", () => {
  it.scoped("a 50 MB result: the guest's answer is within the output limit, and its memory holds no copy of it", () =>
    Effect.gen(function*() {
      const check = checkContainment({ ...SETTINGS, user: "nobody", requireNetworkNamespace: true } as SandboxSettings)
      assert.strictEqual(check._tag, "Available", JSON.stringify(check))
      if (check._tag !== "Available") return
      const cwd = Fs.mkdtempSync(Path.join(Os.tmpdir(), "atrium-guest-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => Fs.rmSync(cwd, { recursive: true, force: true })))
      // As production launches it: a uid of the guests' range when the server is root, and the OS bound on memory.
      const uid = check.containment.ownUids ? SETTINGS.uidBase : undefined
      if (uid !== undefined) Fs.chownSync(cwd, uid, uid)
      const { file, args } = check.containment.command(256, 256 * 1024 * 1024 + GUEST_PROCESS_BYTES, uid)
      const child = ChildProcess.spawn(file, args, { env: {}, cwd, stdio: ["ignore", "ignore", "pipe", "pipe"] })
      yield* Effect.addFinalizer(() => Effect.sync(() => child.kill("SIGKILL")))
      const channel = child.stdio[CHANNEL_FD] as Net.Socket
      const replies: Array<{ readonly bytes: number; readonly message: any }> = []
      const waiting: Array<() => void> = []
      const reader = makeFrameReader(1 << 30, {
        frame: (message) => {
          replies.push({ bytes: reader.parsed() - replies.reduce((sum, r) => sum + r.bytes, 0), message })
          waiting.shift()?.()
        },
        refuse: (problem) => assert.fail(JSON.stringify(problem))
      })
      channel.on("data", reader.push)
      const ask = (message: Record<string, unknown>) =>
        Effect.async<{ readonly bytes: number; readonly message: any }>((resume) => {
          waiting.push(() => resume(Effect.succeed(replies.at(-1)!)))
          channel.write(encodeFrame(message))
        })
      waiting.push(() => {}) // "ready"
      channel.write(encodeFrame({
        files: {},
        env: {},
        packages: [],
        packageIndex: null,
        pyodideIndex: check.containment.runtimes.pyodideIndex,
        runtimes: check.containment.runtimes,
        limits: { ...LIMITS, memoryBytes: 256 * 1024 * 1024 }
      }))
      for (const [id, language, code] of [[1, "python", "'A' * (50 * 1000 * 1000)"], [3, "javascript", "'A'.repeat(50 * 1000 * 1000)"]] as const) {
        const loaded = yield* ask({ type: "load", language, id })
        assert.isTrue(loaded.message.ok, JSON.stringify(loaded.message))
        const before = peakMb(child.pid!)
        const reply = yield* ask({ type: "run", language, code, files: {}, id: id + 1 })
        const growth = peakMb(child.pid!) - before
        console.log(`${language}: the guest answered ${reply.bytes} bytes; its peak memory grew ${growth.toFixed(0)} MB`)
        assert.isTrue(reply.message.ok, JSON.stringify(reply.message).slice(0, 500))
        assert.strictEqual(reply.message.resultBytes, 50_000_000)
        assert.match(reply.message.result, /^A+…\[clipped: 50000000 bytes, limit 65536\]$/)
        assert.isAtMost(reply.bytes, LIMITS.outputBytes + 200, "the guest's answer is within the output limit")
        // The 50 MB string lives in the runtime's own memory; a JavaScript copy of it (and what converting it takes)
        // would add about 150 MB more.
        assert.isBelow(growth, 100, "the result was bounded before a JavaScript string of it was made")
      }
    }), 180_000)
})
