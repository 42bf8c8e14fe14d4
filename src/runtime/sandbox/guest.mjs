// The sandbox's guest process (plain JavaScript: it runs without the TypeScript loader). One process is one sandbox,
// started by `WasmSandbox.ts` with an empty environment, an empty working directory, an unprivileged uid, no network
// and Node's permission model (docs/tools.md, "Containment"). Pyodide (Python) and QuickJS (JavaScript) load on first
// use, share one in-memory working directory, and keep their globals between calls. The host enforces the wall time
// by killing this process; the limits that can be enforced from inside (memory, output, files) are enforced here, so
// a breach is a clean error, not a crash. The host and this process talk over the IPC channel only.

import { constants as fsConstants } from "node:fs"

// What this process needs of Node, taken before anything of the guest runs: the guest must not find them later.
const send = process.send.bind(process)
const exit = process.exit.bind(process)
process.on("disconnect", () => exit(0))
// Messages that arrive before their handler is ready wait here (a process's IPC drops what nobody listens to).
const inbox = []
let deliver
process.on("message", (message) => deliver === undefined ? inbox.push(message) : deliver(message))
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
  lockdown()
  python = py
  return py
}

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
  quickjs = { runtime, vm }
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

const toJson = (value) => {
  if (value === undefined || value === null) return null
  try {
    return JSON.parse(JSON.stringify(value))
  } catch {
    return String(value)
  }
}

const runPython = async (code) => {
  const py = await loadPython()
  syncPython(py)
  let result
  try {
    const value = await py.runPythonAsync(code)
    if (value !== undefined && value !== null && typeof value === "object" && typeof value.toJs === "function") {
      result = toJson(value.toJs({ dict_converter: Object.fromEntries }))
      value.destroy?.()
    } else result = toJson(value)
  } finally {
    collectPython(py)
  }
  return result
}

const runJavaScript = async (code) => {
  const { runtime, vm } = await loadJavaScript()
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
  const value = vm.dump(evaluated.value)
  evaluated.value.dispose()
  return toJson(value)
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
      const result = message.language === "python" ? await runPython(message.code) : await runJavaScript(message.code)
      checkFiles()
      if (breached !== undefined) throw breached
      const changed = changedSince(before)
      send({
        id: message.id,
        ok: true,
        stdout: output.stdout,
        stderr: output.stderr,
        result,
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
