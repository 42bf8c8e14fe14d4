// The sandbox's guest process (plain JavaScript: it runs without the TypeScript loader). One process is one sandbox,
// started by `WasmSandbox.ts` with an empty environment, an empty working directory, an unprivileged uid, no network
// and Node's permission model (docs/tools.md, "Containment"). Pyodide (Python) and QuickJS (JavaScript) load on first
// use, share one in-memory working directory, and keep their globals between calls. The host enforces the wall time
// by killing this process; the limits that can be enforced from inside (memory, output, files) are enforced here, so
// a breach is a clean error, not a crash. The host and this process talk over one channel only: length-prefixed JSON
// frames on the socket the host hands over as fd 3 (`Channel.ts`, which caps what the host reads of each).

import { constants as fsConstants } from "node:fs"
import { Socket } from "node:net"
import { StringDecoder } from "node:string_decoder"

// What this process needs of Node, taken before anything of the guest runs: the guest must not find them later.
const exit = process.exit.bind(process)
const channel = new Socket({ fd: 3, readable: true, writable: true })
channel.on("close", () => exit(0))
channel.on("error", () => exit(1))
const send = (message) => {
  const body = Buffer.from(JSON.stringify(message), "utf8")
  const header = Buffer.allocUnsafe(4)
  header.writeUInt32BE(body.length, 0)
  channel.write(Buffer.concat([header, body]))
}
// Messages that arrive before their handler is ready wait here.
const inbox = []
let deliver
const receive = (message) => deliver === undefined ? inbox.push(message) : deliver(message)
// The host is trusted: its frames are read whole as they come (the cap is on what the host reads of this process).
let chunks = []
let held = 0
let need = 4
let length = -1
channel.on("data", (chunk) => {
  chunks.push(chunk)
  held += chunk.length
  while (held >= need) {
    const all = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, held)
    if (length < 0) {
      length = all.readUInt32BE(0)
      need = 4 + length
      chunks = [all]
      continue
    }
    const body = all.subarray(4, need)
    const rest = all.subarray(need)
    chunks = rest.length > 0 ? [rest] : []
    held = rest.length
    length = -1
    need = 4
    receive(JSON.parse(body.toString("utf8")))
  }
})
const onMessage = (listener) => {
  deliver = listener
  for (const message of inbox.splice(0)) listener(message)
}

// Under the permission model `process.binding` is refused, and Pyodide's file system module asks it for the open
// flags' constants when it loads: it gets them from `fs.constants` instead, and nothing else.
process.binding = (name) => {
  if (name === "constants") return { fs: fsConstants }
  throw new Error("not available in the sandbox")
}

// The first message says what this sandbox is: its limits, variables, files, packages and where the runtimes are.
const workerData = inbox.length > 0 ? inbox.shift() : await new Promise((resolve) => { deliver = (message) => { deliver = undefined; resolve(message) } })
const limits = workerData.limits
const WORKDIR = "/workspace"

/** The working directory: path -> bytes. The one truth between Python's file system and JavaScript's calls. */
const files = new Map()
for (const [path, base64] of Object.entries(workerData.files)) files.set(path, Buffer.from(base64, "base64"))

class LimitError extends Error {
  constructor(limit, message) {
    super(message)
    this.limit = limit
  }
}

// WebAssembly memories grow through this method (Emscripten's heap resize): past the limit the growth fails, and the
// guest sees an allocation failure (Python's MemoryError, QuickJS's out-of-memory) instead of the host's memory
// filling up. Patched before any module is instantiated.
const PAGE = 65536
const originalGrow = WebAssembly.Memory.prototype.grow
let wasmBytes = 0
WebAssembly.Memory.prototype.grow = function(pages) {
  const after = this.buffer.byteLength + pages * PAGE
  if (after > limits.memoryBytes) {
    breach("memory", `memory limit of ${Math.round(limits.memoryBytes / 1048576)} MiB exceeded`)
    throw new RangeError("WebAssembly.Memory.grow(): sandbox memory limit")
  }
  const previous = originalGrow.call(this, pages)
  wasmBytes = Math.max(wasmBytes, this.buffer.byteLength)
  return previous
}

// Which limit the current run hit, if any: the guest sees a plain error (MemoryError, OSError) and may even catch
// it, but the run still ends as a breach of that limit.
let breached
const breach = (limit, message) => {
  breached ??= new LimitError(limit, message)
  return breached
}

let output = { stdout: "", stderr: "", bytes: 0 }
const write = (stream) => (text) => {
  output.bytes += Buffer.byteLength(text)
  if (output.bytes > limits.outputBytes) throw breach("output", `output limit of ${limits.outputBytes} bytes exceeded`)
  output[stream] += text
}

// The guest must not reach this thread's JavaScript: every way to compile code from a string (the constructors of
// the four function kinds) is closed, and the host's network clients are gone. Pyodide's proxies of JavaScript
// objects would otherwise lead from any object to constructor.constructor("return process")().
const lockdown = () => {
  for (const fn of [function() {}, async function() {}, function*() {}, async function*() {}]) {
    Object.defineProperty(Object.getPrototypeOf(fn), "constructor", { value: undefined, writable: false, configurable: false })
  }
  Object.defineProperty(Error, "prepareStackTrace", { value: undefined, writable: false, configurable: false })
}
for (const name of ["fetch", "WebSocket", "XMLHttpRequest", "EventSource", "Request", "Response", "Headers"]) {
  delete globalThis[name]
}
// What the guest cannot be allowed to print to the host's console (Pyodide reports a failed write there).
console.log = console.info = console.warn = console.error = console.debug = () => {}

let python
let pythonError
const loadPython = async () => {
  if (python !== undefined) return python
  if (pythonError !== undefined) throw pythonError
  if (workerData.packages.length > 0 && workerData.packageIndex === null) {
    pythonError = new SetupError(
      `packages ${workerData.packages.join(", ")} cannot be installed: no package index is configured (SANDBOX_PACKAGE_INDEX)`
    )
    throw pythonError
  }
  const { loadPyodide } = await import(workerData.runtimes.pyodide)
  const py = await loadPyodide({
    indexURL: workerData.pyodideIndex,
    // `import js` sees this object only: no fetch, no process, no eval.
    jsglobals: Object.create(null),
    // Packages come only from the configured index; nothing is fetched from a CDN.
    packageBaseUrl: workerData.packageIndex ?? "file:///nonexistent/",
    env: { HOME: WORKDIR, ...workerData.env },
    stdout: write("stdout"),
    stderr: write("stderr"),
    checkAPIVersion: true
  })
  py.setStdout({ write: (bytes) => { write("stdout")(Buffer.from(bytes).toString("utf8")); return bytes.length } })
  py.setStderr({ write: (bytes) => { write("stderr")(Buffer.from(bytes).toString("utf8")); return bytes.length } })
  if (workerData.packages.length > 0) {
    if (workerData.packageIndex === null) {
      pythonError = new SetupError(
        `packages ${workerData.packages.join(", ")} cannot be installed: no package index is configured (SANDBOX_PACKAGE_INDEX)`
      )
      throw pythonError
    }
    try {
      await py.loadPackage(workerData.packages.map((p) => p.split(/[=<>!~]/)[0]), { messageCallback: () => {}, errorCallback: () => {} })
    } catch (error) {
      pythonError = new SetupError(`packages could not be installed from the package index: ${String(error?.message ?? error).slice(0, 500)}`)
      throw pythonError
    }
  }
  const FS = py.FS
  // Files live in MEMFS as JavaScript arrays outside the WebAssembly memory: cap what a run may allocate there.
  const MEMFS = FS.filesystems.MEMFS
  const expand = MEMFS.expandFileStorage
  MEMFS.expandFileStorage = function(node, capacity) {
    if (capacity > limits.fileBytes) {
      breach("files", `a file may hold at most ${limits.fileBytes} bytes`)
      throw new FS.ErrnoError(27 /* EFBIG */)
    }
    return expand.call(this, node, capacity)
  }
  // Nothing of the host is reachable from the guest: no host file system to mount, no way back to the loader.
  delete FS.filesystems.NODEFS
  py.mountNodeFS = () => { throw new Error("not available in the sandbox") }
  FS.mkdirTree(WORKDIR)
  FS.chdir(WORKDIR)
  py.runPython(`
import sys, os, socket
for name in [name for name in sys.modules if name == "pyodide_js" or name.startswith("pyodide_js.")]:
    del sys.modules[name]
os.environ.pop("_", None)
def _no_network(*args, **kwargs):
    raise OSError(101, "Network is unreachable: the sandbox has no network")
socket.socket.connect = socket.socket.connect_ex = socket.socket.bind = _no_network
socket.create_connection = socket.getaddrinfo = socket.gethostbyname = _no_network
del _no_network
os.chdir(${JSON.stringify(WORKDIR)})
`)
  py.unregisterJsModule("pyodide_js")
  const namespace = py.toPy({})
  py.runPython(PYTHON_RESULT, { globals: namespace, filename: "<atrium>" })
  pythonResult = { run: namespace.get("run"), bounded: namespace.get("bounded") }
  namespace.destroy()
  lockdown()
  python = py
  return py
}

// The value of the last expression stays a Python object until it is bounded: Pyodide would turn a str into a
// JavaScript string whole (the 50 MB answer of issue 42), so `run` hands it back wrapped, and `bounded` measures its
// text in Python and lets out at most `limit` bytes of it. A str's size is read without a copy when it is ASCII, and
// in slices otherwise; any other value becomes JSON inside Python, in the guest's own memory and under its limit.
const PYTHON_RESULT = `
import json
from pyodide.code import eval_code_async

async def run(code, namespace):
    return (await eval_code_async(code, namespace, filename="<exec>"),)

def size(text):
    if text.isascii():
        return len(text)
    return sum(len(text[at:at + 65536].encode("utf-8", "surrogatepass")) for at in range(0, len(text), 65536))

def bounded(held, limit):
    value = held[0]
    if value is None:
        return None
    if isinstance(value, str):
        kind, text = "text", value
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2 ** 53:
        # Past what a JSON number keeps exactly: its digits, as text (or its type, past Python's own digit limit).
        try:
            kind, text = "text", str(value)
        except ValueError:
            kind, text = "text", "<int>"
    else:
        try:
            kind, text = "json", json.dumps(value, ensure_ascii=False, allow_nan=False, default=str)
        except Exception:
            try:
                kind, text = "text", str(value)
            except Exception:
                kind, text = "text", "<" + type(value).__name__ + ">"
    total = size(text)
    if total <= limit:
        return (kind, text, total)
    head = text[:limit]
    if not head.isascii():
        head = head.encode("utf-8", "surrogatepass")[:limit].decode("utf-8", "ignore")
    return (kind, head, total)
`
let pythonResult

class SetupError extends Error {}

let quickjs
const loadJavaScript = async () => {
  if (quickjs !== undefined) return quickjs
  const { getQuickJS } = await import(workerData.runtimes.quickjs)
  const module = await getQuickJS()
  const runtime = module.newRuntime()
  runtime.setMemoryLimit(limits.memoryBytes)
  runtime.setMaxStackSize(1024 * 1024)
  const vm = runtime.newContext()
  const fn = (name, impl) => {
    const handle = vm.newFunction(name, (...args) => {
      const values = args.map((arg) => vm.dump(arg))
      try {
        const result = impl(...values)
        return result === undefined ? vm.undefined : vm.newString(typeof result === "string" ? result : JSON.stringify(result))
      } catch (error) {
        return { error: vm.newError(String(error?.message ?? error)) }
      }
    })
    return handle
  }
  const consoleObject = vm.newObject()
  const log = (stream) => fn("log", (...values) => {
    write(stream)(values.map((v) => typeof v === "string" ? v : JSON.stringify(v)).join(" ") + "\n")
  })
  for (const [name, stream] of [["log", "stdout"], ["info", "stdout"], ["warn", "stderr"], ["error", "stderr"]]) {
    const handle = log(stream)
    vm.setProp(consoleObject, name, handle)
    handle.dispose()
  }
  vm.setProp(vm.global, "console", consoleObject)
  consoleObject.dispose()
  const fsObject = vm.newObject()
  const methods = {
    readFile: (path) => {
      const found = files.get(normalize(path))
      if (found === undefined) throw new Error(`ENOENT: no such file ${path}`)
      return found.toString("utf8")
    },
    writeFile: (path, content) => {
      const bytes = Buffer.from(String(content), "utf8")
      if (bytes.length > limits.fileBytes) throw breach("files", `a file may hold at most ${limits.fileBytes} bytes`)
      files.set(normalize(path), bytes)
    },
    listFiles: () => JSON.stringify([...files.keys()].sort()),
    exists: () => undefined
  }
  for (const [name, impl] of Object.entries(methods)) {
    const handle = fn(name, impl)
    vm.setProp(fsObject, name, handle)
    handle.dispose()
  }
  vm.setProp(vm.global, "fs", fsObject)
  fsObject.dispose()
  const envObject = vm.newObject()
  for (const [name, value] of Object.entries(workerData.env)) {
    const handle = vm.newString(value)
    vm.setProp(envObject, name, handle)
    handle.dispose()
  }
  vm.setProp(vm.global, "env", envObject)
  envObject.dispose()
  // listFiles returns text across the boundary: give the guest an array.
  vm.unwrapResult(vm.evalCode(`{ const list = fs.listFiles; fs.listFiles = () => JSON.parse(list()) }`)).dispose()
  // Captured before any guest code runs, so a guest that replaces JSON or String's methods changes nothing here.
  const helpers = vm.unwrapResult(vm.evalCode(`(() => {
    const stringify = JSON.stringify
    const toText = String
    const slice = Function.prototype.call.bind(String.prototype.slice)
    const kindOf = (value) => {
      if (value === undefined || value === null) return ["none", ""]
      if (typeof value === "string") return ["text", value]
      try {
        const text = stringify(value)
        return typeof text === "string" ? ["json", text] : ["none", ""]
      } catch {}
      try {
        return ["text", toText(value)]
      } catch {
        return ["text", "<" + typeof value + ">"]
      }
    }
    return [kindOf, slice]
  })()`))
  const kindOf = vm.getProp(helpers, 0)
  const slice = vm.getProp(helpers, 1)
  helpers.dispose()
  quickjs = { runtime, vm, kindOf, slice }
  return quickjs
}

const normalize = (path) => {
  const clean = String(path).replace(/^(\.\/)+/, "").replace(/^\/workspace\//, "")
  if (clean.length === 0 || clean.length > 200 || clean.startsWith("/") || clean.split("/").some((s) => s === ".." || s === "." || s === "")) {
    throw new Error(`invalid path ${path}: paths are relative to the working directory, without . or .. segments`)
  }
  return clean
}

/** Python's working directory -> `files`, and what changed. */
const collectPython = (py) => {
  const FS = py.FS
  const seen = new Set()
  const walk = (dir, prefix) => {
    for (const name of FS.readdir(dir)) {
      if (name === "." || name === "..") continue
      const full = `${dir}/${name}`
      // A link is not followed (its target may be missing, or outside the workspace): the workspace keeps files.
      const stat = FS.lstat(full)
      const rel = prefix + name
      if (FS.isDir(stat.mode)) walk(full, rel + "/")
      else if (FS.isFile(stat.mode)) {
        seen.add(rel)
        const bytes = Buffer.from(FS.readFile(full))
        const before = files.get(rel)
        if (before === undefined || !before.equals(bytes)) files.set(rel, bytes)
      }
    }
  }
  walk(WORKDIR, "")
  for (const path of [...files.keys()]) if (!seen.has(path)) files.delete(path)
}

/** `files` -> Python's working directory, before a run (JavaScript may have changed them). */
const syncPython = (py) => {
  const FS = py.FS
  const extra = []
  const walk = (dir, prefix) => {
    for (const name of FS.readdir(dir)) {
      if (name === "." || name === "..") continue
      const full = `${dir}/${name}`
      if (FS.isDir(FS.lstat(full).mode)) walk(full, prefix + name + "/")
      else if (!files.has(prefix + name)) extra.push(full)
    }
  }
  walk(WORKDIR, "")
  for (const full of extra) FS.unlink(full)
  for (const [path, bytes] of files) {
    const full = `${WORKDIR}/${path}`
    let current
    try {
      current = Buffer.from(FS.readFile(full))
    } catch {
      current = undefined
    }
    if (current === undefined || !current.equals(bytes)) {
      const dir = full.slice(0, full.lastIndexOf("/"))
      FS.mkdirTree(dir)
      FS.writeFile(full, bytes)
    }
  }
}

const snapshot = () => new Map([...files].map(([path, bytes]) => [path, bytes]))

const changedSince = (before) => {
  const changed = []
  for (const [path, bytes] of files) {
    const old = before.get(path)
    if (old === undefined || !old.equals(bytes)) changed.push(path)
  }
  return changed
}

const checkFiles = () => {
  if (files.size > limits.maxFiles) throw new LimitError("files", `at most ${limits.maxFiles} files may be in the working directory`)
  let total = 0
  for (const bytes of files.values()) total += bytes.length
  if (total > limits.fileBytes) throw new LimitError("files", `the working directory exceeds ${limits.fileBytes} bytes`)
}

/**
 * The result as the host gets it, and its size. It counts against the output limit with stdout and stderr: a result
 * larger than what they left is cut to that many bytes and says so (`Clip.ts` on the host clips the same way).
 */
const finish = (kind, head, size) => {
  const left = Math.max(0, limits.outputBytes - output.bytes)
  output.bytes += Math.min(size, left)
  if (size <= left) return { result: kind === "json" ? JSON.parse(head) : head, resultBytes: size }
  const cut = new StringDecoder("utf8").write(Buffer.from(head.slice(0, left), "utf8").subarray(0, left))
  return { result: `${cut}…[clipped: ${size} bytes, limit ${left}]`, resultBytes: size }
}

const runPython = async (code) => {
  const py = await loadPython()
  syncPython(py)
  let held
  try {
    held = await pythonResult.run(code, py.globals)
  } finally {
    collectPython(py)
  }
  let bounded
  try {
    bounded = pythonResult.bounded(held, Math.max(0, limits.outputBytes - output.bytes))
  } finally {
    held.destroy()
  }
  if (bounded === undefined || bounded === null) return { result: null, resultBytes: 0 }
  const [kind, head, size] = bounded.toJs()
  bounded.destroy()
  return finish(kind, head, size)
}

/** Slices of a QuickJS string are read one at a time: its size is known, and only its start is kept. */
const SLICE = 1 << 20

const runJavaScript = async (code) => {
  const { runtime, vm, kindOf, slice } = await loadJavaScript()
  const evaluated = vm.evalCode(code, "main.js")
  runtime.executePendingJobs()
  if (evaluated.error) {
    const error = vm.dump(evaluated.error)
    evaluated.error.dispose()
    const message = typeof error === "object" && error !== null
      ? `${error.name ?? "Error"}: ${error.message ?? JSON.stringify(error)}`
      : String(error)
    throw new GuestError(message)
  }
  const pair = vm.callFunction(kindOf, vm.undefined, evaluated.value)
  evaluated.value.dispose()
  if (pair.error) {
    pair.error.dispose()
    throw new GuestError("the value of the last expression could not be read")
  }
  const kindHandle = vm.getProp(pair.value, 0)
  const kind = vm.getString(kindHandle)
  kindHandle.dispose()
  const text = vm.getProp(pair.value, 1)
  pair.value.dispose()
  if (kind === "none") {
    text.dispose()
    return { result: null, resultBytes: 0 }
  }
  const lengthHandle = vm.getProp(text, "length")
  const length = vm.getNumber(lengthHandle)
  lengthHandle.dispose()
  const left = Math.max(0, limits.outputBytes - output.bytes)
  let size = 0
  let head = ""
  for (let at = 0; at < length;) {
    const from = vm.newNumber(at)
    const to = vm.newNumber(at + SLICE)
    const piece = vm.unwrapResult(vm.callFunction(slice, vm.undefined, text, from, to))
    from.dispose()
    to.dispose()
    let part = vm.getString(piece)
    piece.dispose()
    // A surrogate pair is not split between two slices (each half alone would count as 3 bytes).
    const last = part.charCodeAt(part.length - 1)
    if (part.length > 1 && at + part.length < length && last >= 0xd800 && last <= 0xdbff) part = part.slice(0, -1)
    at += part.length
    if (size <= left) head += part
    size += Buffer.byteLength(part)
  }
  text.dispose()
  return finish(kind, head, size)
}

class GuestError extends Error {}

const describe = (error) => {
  if (breached !== undefined) return { kind: "limit", limit: breached.limit, message: breached.message }
  if (error instanceof LimitError) return { kind: "limit", limit: error.limit, message: error.message }
  if (error instanceof SetupError) return { kind: "setup", message: error.message }
  const text = String(error?.message ?? error)
  // The OS bound on the process (RLIMIT_DATA) refuses a buffer outside WebAssembly: that is the memory limit too.
  if (/^(InternalError: out of memory|MemoryError)/m.test(text) || /RangeError: Array buffer allocation failed/.test(text)) {
    return { kind: "limit", limit: "memory", message: `memory limit of ${Math.round(limits.memoryBytes / 1048576)} MiB exceeded` }
  }
  return { kind: "error", message: lastLines(text) }
}

const lastLines = (raw) => {
  // A Python traceback starts in Pyodide's own frames: the guest's start at "<exec>".
  const at = raw.indexOf('  File "<exec>"')
  const text = at >= 0 ? `Traceback (most recent call last):\n${raw.slice(at)}` : raw
  const lines = text.trim().split("\n")
  return lines.slice(-12).join("\n").slice(-4000)
}

onMessage(async (message) => {
  if (message.type === "load") {
    try {
      if (message.language === "python") await loadPython()
      else await loadJavaScript()
      send({ id: message.id, ok: true })
    } catch (error) {
      send({ id: message.id, ok: false, error: { ...describe(error), kind: "setup" } })
    }
    return
  }
  if (message.type === "setup") {
    try {
      if (workerData.packages.length > 0 || message.script.trim().length > 0) {
        output = { stdout: "", stderr: "", bytes: 0 }
        await runPython(message.script)
      }
      send({ id: message.id, ok: true })
    } catch (error) {
      const described = describe(error)
      send({
        id: message.id,
        ok: false,
        error: { ...described, kind: "setup", message: described.kind === "setup" ? described.message : `setup script failed: ${described.message}` }
      })
    }
    return
  }
  if (message.type === "run") {
    output = { stdout: "", stderr: "", bytes: 0 }
    breached = undefined
    // The workspace's files that changed outside the sandbox since the last run (a `write_file`, say).
    for (const [path, base64] of Object.entries(message.files ?? {})) files.set(path, Buffer.from(base64, "base64"))
    const before = snapshot()
    try {
      const { result, resultBytes } = message.language === "python" ? await runPython(message.code) : await runJavaScript(message.code)
      checkFiles()
      if (breached !== undefined) throw breached
      const changed = changedSince(before)
      send({
        id: message.id,
        ok: true,
        stdout: output.stdout,
        stderr: output.stderr,
        result,
        resultBytes,
        files: changed.map((path) => ({ path, base64: files.get(path).toString("base64") }))
      })
    } catch (error) {
      // A failed run leaves the directory as it was: nothing half-written reaches the workspace.
      files.clear()
      for (const [path, bytes] of before) files.set(path, bytes)
      send({ id: message.id, ok: false, stdout: output.stdout.slice(0, 4000), stderr: output.stderr.slice(-4000), error: describe(error) })
    }
  }
})
send({ type: "ready" })
