/**
 * A counting probe for bench/count-run.ts, preloaded into the platform with `--import` (never in production): fibers
 * started (Effect's fiber-id counter), Effect ops evaluated (each op handler of the fiber run loop wrapped), and
 * socket writes by peer (HTTP clients, PostgreSQL, Redis; `write` and `writev` apart) and HTTP response writes. SIGUSR2 writes the counts to
 * PROBE_OUT. PROBE_OPS=1 also counts ops by the fiber's span (and, with PROBE_FIBERS=1, the place its fiber started);
 * PROBE_FIBERS=1 counts fibers by where they start; PROBE_TRACE=1 keeps the last HTTP writes (PROBE_OUT.trace);
 * PROBE_SQL=1 counts the statements sent to PostgreSQL by their text (PROBE_OUT.sql), read from the frontend's Parse
 * and Query messages on the wire, whatever client sent them: what bench/effect-floor.ts's `--statements` replays.
 */
import * as http from "node:http"
import * as net from "node:net"
import * as fs from "node:fs"
const OUT = process.env.PROBE_OUT ?? "/tmp/probe.json"
const counts = { ops: 0, writes: {}, writev: {} }
const FR = await import(new URL("../node_modules/effect/dist/esm/internal/fiberRuntime.js", import.meta.url).href)
const proto = FR.FiberRuntime.prototype
const opsBySpan = new Map()
const trace = []
for (const key of Object.getOwnPropertyNames(proto)) {
  if (!/^[A-Z][A-Za-z]+$/.test(key)) continue
  const orig = proto[key]
  if (typeof orig !== "function") continue
  proto[key] = process.env.PROBE_OPS === "1"
    ? function(op) {
      counts.ops++
      const span = `${this.currentSpan?.name ?? "-"} ${this.probeSite ?? ""}`.replace(/\([A-Za-z]+_[A-Za-z0-9]+\)/, "(…)")
      opsBySpan.set(span, (opsBySpan.get(span) ?? 0) + 1)
      return orig.call(this, op)
    }
    : function(op) { counts.ops++; return orig.call(this, op) }
}
const portOf = (s) => {
  const p = s.remotePort
  return p === 5432 ? "pg" : p === 6379 ? "redis" : s.server || s._server ? "http" : String(p ?? "?")
}
const statements = new Map()
/** The statement texts in a buffer of PostgreSQL frontend messages: `P` (Parse: name, text) and `Q` (Query: text). */
const noteStatements = (buffer) => {
  if (!Buffer.isBuffer(buffer)) return
  let at = 0
  while (at + 5 <= buffer.length) {
    const type = buffer[at]
    const length = buffer.readInt32BE(at + 1)
    if (length < 4 || at + 1 + length > buffer.length) return
    const body = buffer.subarray(at + 5, at + 1 + length)
    let text
    if (type === 0x51) text = body.subarray(0, body.indexOf(0)).toString()
    else if (type === 0x50) {
      const nameEnd = body.indexOf(0)
      text = body.subarray(nameEnd + 1, body.indexOf(0, nameEnd + 1)).toString()
    }
    if (text !== undefined) {
      const key = text.replace(/\s+/g, " ").trim()
      statements.set(key, (statements.get(key) ?? 0) + 1)
    }
    at += 1 + length
  }
}
const orig = net.Socket.prototype._writeGeneric
net.Socket.prototype._writeGeneric = function(writev, data, encoding, cb) {
  const k = portOf(this)
  if (process.env.PROBE_SQL === "1" && k === "pg") for (const d of writev ? data : [{ chunk: data }]) noteStatements(d.chunk ?? d)
  const m = writev ? counts.writev : counts.writes
  m[k] = (m[k] ?? 0) + 1
  if (process.env.PROBE_TRACE === "1" && k === "http") {
    const pieces = writev ? data.map((d) => String(d.chunk ?? d)) : [String(data)]
    trace.push(`${(performance.now() % 100000).toFixed(2)} ${writev ? "writev" : "write"} ${pieces.map((p) => JSON.stringify(p.slice(0, 60))).join(" | ")}`)
    if (trace.length > 200) trace.shift()
  }
  return orig.call(this, writev, data, encoding, cb)
}
// Response writes (each a chunk of its own on a chunked response), whatever socket writes they end in.
counts.responseWrites = 0
const origWrite = http.OutgoingMessage.prototype.write
http.OutgoingMessage.prototype.write = function(...args) {
  if (this instanceof http.ServerResponse) counts.responseWrites++
  return origWrite.apply(this, args)
}
const fibers = () => globalThis["effect/GlobalValue"]?.get(Symbol.for("effect/Fiber/Id/_fiberCounter"))?.current ?? -1
process.on("SIGUSR2", () => {
  if (process.env.PROBE_TRACE === "1") fs.writeFileSync(`${OUT}.trace`, trace.join("\n"))
  if (process.env.PROBE_SQL === "1") fs.writeFileSync(`${OUT}.sql`, JSON.stringify([...statements].sort((a, b) => b[1] - a[1])))
  fs.writeFileSync(OUT, JSON.stringify({ ...counts, opsBySpan: Object.fromEntries(opsBySpan), fibers: fibers(), cpu: process.cpuUsage() }))
})
// PROBE_FIBERS=1: where fibers start, by the span they start in and the first frames outside Effect.
if (process.env.PROBE_FIBERS === "1") {
  const seen = new WeakSet()
  const sites = new Map()
  Error.stackTraceLimit = 40
  const note = (fiber) => {
    if (seen.has(fiber)) return
    seen.add(fiber)
    const frames = (new Error().stack ?? "").split("\n").slice(2)
      .filter((l) => !/node_modules\/effect\/|probe\.mjs|node:internal/.test(l)).slice(0, 4)
      .map((l) => l.trim().replace(/\(.*\/(node_modules|dist)\//, "($1/"))
    const key = `[${fiber.currentSpan?.name ?? "-"}] ${frames.join(" < ")}`
    fiber.probeSite = frames[0]?.replace(/^at /, "") ?? ""
    sites.set(key, (sites.get(key) ?? 0) + 1)
  }
  for (const m of ["resume", "start"]) {
    const orig = proto[m]
    proto[m] = function(effect) { note(this); return orig.call(this, effect) }
  }
  process.on("SIGUSR2", () => {
    fs.writeFileSync(`${OUT}.fibers`, JSON.stringify([...sites].sort((a, b) => b[1] - a[1])))
  })
}
// PROBE_SITES=1: where AbortControllers are aborted (each a DOMException) and where crypto fills random bytes, by the
// first frames outside Node (PROBE_OUT.sites).
if (process.env.PROBE_SITES === "1") {
  const crypto = await import("node:crypto")
  const sites = new Map()
  const note = (what) => {
    const frames = (new Error().stack ?? "").split("\n").slice(3)
      .filter((l) => !/probe\.mjs|node:internal/.test(l)).slice(0, 5)
      .map((l) => l.trim().replace(/\(.*\/(node_modules|dist)\//, "($1/"))
    const key = `${what} ${frames.join(" < ")}`
    sites.set(key, (sites.get(key) ?? 0) + 1)
  }
  const abort = AbortController.prototype.abort
  AbortController.prototype.abort = function(...args) { note("abort"); return abort.apply(this, args) }
  const fill = crypto.randomFillSync
  crypto.default.randomFillSync = function(...args) { note("randomFillSync"); return fill.apply(this, args) }
  const bytes = crypto.randomBytes
  crypto.default.randomBytes = function(...args) { note("randomBytes"); return bytes.apply(this, args) }
  const uuid = crypto.randomUUID
  crypto.default.randomUUID = function(...args) { note("randomUUID"); return uuid.apply(this, args) }
  const getRandomValues = globalThis.crypto.getRandomValues.bind(globalThis.crypto)
  globalThis.crypto.getRandomValues = function(a) { note("getRandomValues"); return getRandomValues(a) }
  // The named exports of `node:crypto` (an ESM import's bindings) follow the patched functions.
  ;(await import("node:module")).syncBuiltinESMExports()
  process.on("SIGUSR2", () => {
    fs.writeFileSync(`${OUT}.sites`, JSON.stringify([...sites].sort((a, b) => b[1] - a[1])))
  })
}
