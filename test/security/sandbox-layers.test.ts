import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { checkContainment, guestProcess } from "../../src/runtime/sandbox/Containment.js"
import { sweepWorkdirs, workdirPrefix } from "../../src/runtime/sandbox/Guests.js"
import { pollUntil } from "../support/Poll.js"

/**
 * The layers under the WebAssembly runtimes, each on its own (issue 24: breaking one layer alone gives nothing). This
 * test assumes the worst: a guest that escaped Pyodide and QuickJS and runs its own JavaScript in the guest process.
 * It starts an attack script exactly as a guest is started (the same command, flags, user, namespace and empty
 * environment) and asserts what the script could not do: read a host file, see a secret, start a process, write a
 * file, connect to a listener on 127.0.0.1, or compile code from a string.
 */

const ATTACK = `
const results = {}
const attempt = async (name, body) => {
  try {
    results[name] = { ok: true, value: String(await body()).slice(0, 200) }
  } catch (error) {
    results[name] = { ok: false, code: String(error?.code ?? error?.name ?? "error") }
  }
}
const fs = await import("node:fs")
const [hostFile, marker, port] = [process.argv.at(-3), process.argv.at(-2), Number(process.argv.at(-1))]
await attempt("read /etc/passwd", () => fs.readFileSync("/etc/passwd", "utf8"))
await attempt("read the host file", () => fs.readFileSync(hostFile, "utf8"))
await attempt("read /proc/1/environ", () => fs.readFileSync("/proc/1/environ", "utf8"))
await attempt("write a marker", () => fs.writeFileSync(marker + "/fs", "x"))
await attempt("spawn a process", async () => (await import("node:child_process")).execFileSync("touch", [marker + "/spawn"]))
await attempt("start a worker", async () => new (await import("node:worker_threads")).Worker("1", { eval: true }))
await attempt("process.binding", () => process.binding("fs"))
await attempt("eval", () => eval("1 + 1"))
await attempt("Function", () => new Function("return 1")())
await attempt("connect to the listener", () => new Promise(async (resolve, reject) => {
  const socket = (await import("node:net")).connect(port, "127.0.0.1")
  socket.on("connect", () => { socket.destroy(); resolve("connected") })
  socket.on("error", reject)
}))
results.env = Object.keys(process.env).filter((name) => !name.startsWith("NODE_CHANNEL"))
results.uid = process.getuid()
process.stdout.write(JSON.stringify(results))
`

describe("sandbox layers under a guest that escaped its runtime", () => {
  it.effect("no host file, no secret, no process, no write, no connection, no code from strings", () =>
    Effect.gen(function*() {
      const check = checkContainment({
        packageIndex: Option.none(),
        uidBase: 200_000,
        uidCount: 1000,
        requireNetworkNamespace: true
      } as Parameters<typeof checkContainment>[0])
      assert.strictEqual(check._tag, "Available", JSON.stringify(check))
      if (check._tag !== "Available") return

      const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "atrium-layers-"))
      Fs.chmodSync(dir, 0o755)
      const hostFile = Path.join(dir, "host-secret.txt")
      Fs.writeFileSync(hostFile, "HOST-SECRET", { mode: 0o644 })
      const markers = Path.join(dir, "markers")
      Fs.mkdirSync(markers, { mode: 0o777 })
      Fs.chmodSync(markers, 0o777)
      const attack = Path.join(dir, "attack.mjs")
      Fs.writeFileSync(attack, ATTACK, { mode: 0o644 })
      let connections = 0
      const listener = Net.createServer((socket) => {
        connections++
        socket.destroy()
      })
      yield* Effect.promise(() => new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve)))
      const port = (listener.address() as Net.AddressInfo).port

      // The guest's own command, with the attack script where the guest script stands (and readable as it is).
      const { file, args } = check.containment.command(64, 512 * 1024 * 1024, check.containment.ownUids ? 200_123 : undefined)
      const guest = args.at(-1)!
      const attackArgs = args.map((arg) => arg === guest ? attack : arg === `--allow-fs-read=${guest}` ? `--allow-fs-read=${attack}` : arg)
      const output = ChildProcess.spawnSync(file, [...attackArgs, hostFile, markers, String(port)], {
        env: {},
        cwd: dir,
        encoding: "utf8",
        timeout: 30_000
      })
      listener.close()
      const results = JSON.parse(output.stdout || "{}")
      Fs.rmSync(dir, { recursive: true, force: true })

      assert.isDefined(results.uid, `${output.stdout}\n${output.stderr}`)
      for (const name of ["read /etc/passwd", "read the host file", "read /proc/1/environ", "write a marker", "spawn a process", "start a worker", "process.binding", "eval", "Function", "connect to the listener"]) {
        assert.isFalse(results[name]?.ok, `${name}: ${JSON.stringify(results[name])}`)
      }
      assert.strictEqual(results["read /etc/passwd"].code, "ERR_ACCESS_DENIED")
      assert.strictEqual(results["spawn a process"].code, "ERR_ACCESS_DENIED")
      assert.strictEqual(results.eval.code, "EvalError")
      assert.oneOf(results["connect to the listener"].code, ["ENETUNREACH", "ECONNREFUSED", "EHOSTUNREACH"])
      assert.deepStrictEqual(results.env, [], "the guest's environment is empty")
      if (process.getuid?.() === 0) assert.notStrictEqual(results.uid, 0, "a root server's guest runs unprivileged")
      assert.strictEqual(connections, 0, "nothing reached the listener")
    }), 60_000)

  it.effect("killing a guest's launcher ends the guest: its own PID namespace, its own uid, its tree gone with it", () =>
    Effect.gen(function*() {
      const check = checkContainment({ packageIndex: Option.none(), uidBase: 200_000, uidCount: 1000, requireNetworkNamespace: true } as Parameters<typeof checkContainment>[0])
      assert.strictEqual(check._tag, "Available", JSON.stringify(check))
      if (check._tag !== "Available") return
      const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "atrium-layers-"))
      Fs.chmodSync(dir, 0o755)
      const idle = Path.join(dir, "idle.mjs")
      Fs.writeFileSync(idle, "setInterval(() => {}, 1000)\n", { mode: 0o644 })
      const uid = check.containment.ownUids ? 200_321 : undefined
      const { file, args } = check.containment.command(64, 512 * 1024 * 1024, uid)
      const guest = args.at(-1)!
      const child = ChildProcess.spawn(file, args.map((arg) => arg === guest ? idle : arg === `--allow-fs-read=${guest}` ? `--allow-fs-read=${idle}` : arg), { env: {}, cwd: dir, stdio: "ignore" })
      // The idle script stands where the guest script does: found as the guest is, by what its launchers run.
      const pid = yield* pollUntil(Effect.sync(() => guestProcessOf(child.pid!, idle)), (pid) => pid !== undefined, "the guest process started", { every: 50, within: 5_000 })
      const status = Fs.readFileSync(`/proc/${pid}/status`, "utf8")
      assert.match(status, /^NSpid:\s+\d+\s+1$/m, "PID 1 of a namespace of its own")
      if (uid !== undefined) assert.match(status, new RegExp(`^Uid:\\s+${uid}\\s+${uid}\\s+${uid}\\s+${uid}$`, "m"))
      assert.match(Fs.readFileSync(`/proc/${pid}/limits`, "utf8"), /^Max data size\s+536870912\s+536870912/m)
      child.kill("SIGKILL")
      yield* pollUntil(Effect.sync(() => !Fs.existsSync(`/proc/${pid}`)), (gone) => gone, "the guest died with its launcher", { every: 50, within: 2_000 })
      Fs.rmSync(dir, { recursive: true, force: true })
      assert.isUndefined(guestProcess(process.pid), "no guest process is left under this one")
    }), 30_000)

  it("the start-up sweep removes the working folders of dead servers' guests, and only those", () => {
    const dead = Path.join(Os.tmpdir(), "atrium-sandbox-999999999.1-dead00")
    const mine = `${workdirPrefix()}alive0`
    const legacy = Path.join(Os.tmpdir(), "atrium-sandbox-legacy")
    for (const dir of [dead, mine, legacy]) Fs.mkdirSync(Path.join(dir, "sub"), { recursive: true })
    try {
      const removed = sweepWorkdirs()
      assert.include(removed, Path.basename(dead))
      assert.isFalse(Fs.existsSync(dead), "a dead server's folder is removed")
      assert.isTrue(Fs.existsSync(mine), "a live server's folder is kept")
      assert.isTrue(Fs.existsSync(legacy), "a folder without its server's name is left alone")
    } finally {
      for (const dir of [dead, mine, legacy]) Fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})

/** The process under `launcher` that runs `script` (not a launcher naming it as an argument). */
const guestProcessOf = (launcher: number, script: string): number | undefined => {
  const queue = [launcher]
  while (queue.length > 0) {
    const pid = queue.shift()!
    try {
      const args = Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")
      if (args.includes(script) && !/(^|\/)(setpriv|unshare|prlimit)$/.test(args[0]!)) return pid
      for (const task of Fs.readdirSync(`/proc/${pid}/task`)) {
        queue.push(...Fs.readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number))
      }
    } catch {
      // Ended meanwhile.
    }
  }
  return undefined
}
