import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { checkCgroups, groupOf, type GuestCgroups } from "./Cgroup.js"
import type { SandboxSettings } from "./Config.js"

/**
 * How a guest process is started, decided once at start (docs/tools.md, "Containment"). Each layer stands alone, so
 * breaking one gives nothing:
 * - its own OS process, talking to the host over one framed channel only (fd 3, `Channel.ts`), killed with its
 *   whole tree if the server dies or kills it (`--pdeathsig` on the namespace's holder and on the guest, which is
 *   PID 1 of its namespace);
 * - an empty environment and an empty working directory of its own;
 * - when the server is root, a uid and gid of its own from `SANDBOX_UID_BASE`, without supplementary groups;
 * - no network: a network namespace of its own (`unshare --net`, or `--user --net` for a non-root server);
 * - a PID namespace of its own with its own /proc: it sees no other process;
 * - an OS bound on its memory (`RLIMIT_DATA`, every private writable mapping: WebAssembly memories, V8's heap and the
 *   buffers outside both), where WebAssembly's address-space reservations (some 22 GB of `RLIMIT_AS` for one
 *   Pyodide) leave `RLIMIT_AS` useless; and, where the host gives one, a memory cgroup of its own (`Cgroup.ts`), which
 *   bounds all the kernel charges it;
 * - Node's permission model: it may read only the guest script and the runtimes' package files; no child processes,
 *   workers, addons, WASI or inspector; no code compiled from strings (`eval`, `Function`).
 * Where a layer cannot be had, the containment is unavailable with the reason, and `run_code` refuses (fails closed).
 * The start-up self-check then looks at a live guest from the outside (`verifyGuest`) before `run_code` is offered.
 */

export interface GuestRuntimes {
  /** `import()`-able URLs of the runtimes' entry points (resolved here: the guest resolves nothing itself). */
  readonly pyodide: string
  readonly quickjs: string
  /** Pyodide's own files (its `indexURL`). */
  readonly pyodideIndex: string
}

export interface Containment {
  readonly runtimes: GuestRuntimes
  /**
   * The command that starts one guest: its JavaScript heap, the OS bound on its memory, and the uid (also its gid)
   * it runs as when the server is root (`undefined` otherwise).
   */
  readonly command: (
    heapMb: number,
    memoryBytes: number,
    uid: number | undefined,
    cgroup?: string
  ) => { readonly file: string; readonly args: ReadonlyArray<string> }
  /** The memory cgroups guests get, when the host gives them (`cgroup` of `command` is one of their folders). */
  readonly cgroups: GuestCgroups | undefined
  /** Whether guests get uids of their own (the server is root): then `WasmSandbox` hands them out. */
  readonly ownUids: boolean
  /** Whether guests get a PID namespace of their own. */
  readonly pidNamespace: boolean
  /** The layers as configured, for the start-up log; `/api/health` says those checked in a live guest. */
  readonly layers: ReadonlyArray<string>
}

export type ContainmentCheck =
  | { readonly _tag: "Available"; readonly containment: Containment }
  | { readonly _tag: "Unavailable"; readonly reason: string }

const GUEST = fileURLToPath(new URL("./guest.mjs", import.meta.url))

/** The folder of the package an entry file belongs to (its nearest `package.json` with a name). */
const packageRoot = (entry: string): string => {
  let dir = Path.dirname(entry)
  while (dir !== Path.dirname(dir)) {
    const manifest = Path.join(dir, "package.json")
    if (Fs.existsSync(manifest) && typeof JSON.parse(Fs.readFileSync(manifest, "utf8")).name === "string") return dir
    dir = Path.dirname(dir)
  }
  throw new Error(`no package.json above ${entry}`)
}

/** Every package folder the runtimes load files from: the guest may read these and nothing else. */
const runtimeFiles = () => {
  const require = createRequire(import.meta.url)
  const pyodide = packageRoot(require.resolve("pyodide/package.json"))
  const quickjsEntry = require.resolve("quickjs-emscripten")
  const fromQuickjs = createRequire(quickjsEntry)
  const core = fromQuickjs.resolve("quickjs-emscripten-core")
  // quickjs-emscripten's module graph names every build variant of its `@jitl` scope, so the scope is read whole.
  const roots = new Set([
    pyodide,
    packageRoot(quickjsEntry),
    packageRoot(core),
    Path.dirname(packageRoot(createRequire(core).resolve("@jitl/quickjs-ffi-types")))
  ])
  // The ES module entry loads the one variant used; the CommonJS one would load them all.
  const quickjsModule = Path.join(packageRoot(quickjsEntry), "dist", "index.mjs")
  return {
    runtimes: {
      pyodide: pathToFileURL(Path.join(pyodide, "pyodide.mjs")).href,
      quickjs: pathToFileURL(Fs.existsSync(quickjsModule) ? quickjsModule : quickjsEntry).href,
      pyodideIndex: pyodide + Path.sep
    },
    readable: [...roots]
  }
}

const succeeds = (file: string, args: ReadonlyArray<string>) => {
  const result = ChildProcess.spawnSync(file, args, { stdio: "ignore", timeout: 5_000, env: {} })
  return result.status === 0
}

/** A real user whose uid lies in the guests' range, if any: a guest must never be someone. */
const userInRange = (base: number, count: number): string | undefined => {
  const passwd = Fs.existsSync("/etc/passwd") ? Fs.readFileSync("/etc/passwd", "utf8") : ""
  for (const line of passwd.split("\n")) {
    const [name, , uid, gid] = line.split(":")
    if (name === undefined || uid === undefined) continue
    for (const id of [Number(uid), Number(gid)]) if (id >= base && id < base + count) return `${name} (${id})`
  }
  return undefined
}

export const checkContainment = (settings: SandboxSettings): ContainmentCheck => {
  const unavailable = (reason: string): ContainmentCheck => ({ _tag: "Unavailable", reason })
  if (process.platform !== "linux") return unavailable(`sandboxes need Linux namespaces; this is ${process.platform}`)
  if (!Fs.existsSync(GUEST)) return unavailable(`the guest script ${GUEST} is missing (the build did not copy it)`)

  let files: ReturnType<typeof runtimeFiles>
  try {
    files = runtimeFiles()
  } catch (error) {
    return unavailable(`the WebAssembly runtimes cannot be found: ${String(error)}`)
  }
  if (settings.packageIndex._tag === "Some" && !/^[a-z]+:\/\//.test(settings.packageIndex.value)) {
    files.readable.push(Path.resolve(settings.packageIndex.value))
  }

  const permission = process.allowedNodeEnvironmentFlags.has("--permission")
    ? "--permission"
    : process.allowedNodeEnvironmentFlags.has("--experimental-permission")
    ? "--experimental-permission"
    : undefined
  if (permission === undefined) return unavailable(`Node ${process.version} has no permission model (Node 20.19+ has)`)
  if (!succeeds("setpriv", ["--version"])) return unavailable("setpriv (util-linux) is not installed")

  const root = process.getuid?.() === 0
  if (root) {
    if (settings.uidBase + settings.uidCount > 0xFFFF_FFFE) return unavailable("SANDBOX_UID_BASE + SANDBOX_UID_COUNT is past the last uid")
    const taken = userInRange(settings.uidBase, settings.uidCount)
    if (taken !== undefined) {
      return unavailable(`the user ${taken} is in the guests' uid range SANDBOX_UID_BASE..+SANDBOX_UID_COUNT; move the range`)
    }
  }
  if (!succeeds("prlimit", ["--version"])) return unavailable("prlimit (util-linux) is not installed")

  const layers = ["own process", "empty environment", "own empty working directory"]
  // The PID namespace is asked for with the network one; a host that gives only the latter keeps that much.
  const user = root ? [] : ["--user"]
  const withPid = [...user, "--net", "--pid", "--fork", "--mount-proc", "--kill-child"]
  let prefix: Array<string>
  let pidNamespace = false
  if (succeeds("unshare", [...withPid, "true"])) {
    prefix = ["unshare", ...withPid, "--"]
    pidNamespace = true
    layers.push("network namespace", "PID namespace")
  } else if (succeeds("unshare", [...user, "--net", "true"])) {
    prefix = ["unshare", ...user, "--net", "--"]
    layers.push("network namespace", "NO PID namespace (unshare --pid failed)")
  } else if (settings.requireNetworkNamespace) {
    return unavailable(
      "no network namespace can be made here (unshare --net failed: a container without CAP_SYS_ADMIN or user " +
        "namespaces?); set SANDBOX_REQUIRE_NETNS=false to run code without one"
    )
  } else {
    prefix = []
    layers.push("NO network namespace (SANDBOX_REQUIRE_NETNS=false)")
  }
  if (root) layers.push(`own uid from ${settings.uidBase} (of ${settings.uidCount})`)
  layers.push("RLIMIT_DATA", "Node permission model (runtime files only)", "no code from strings")
  const cgroupCheck = checkCgroups()
  const cgroups = cgroupCheck._tag === "Available" ? cgroupCheck.cgroups : undefined
  layers.push(
    cgroups !== undefined ? `memory cgroup (${cgroups.version})` : `NO memory cgroup (${(cgroupCheck as { reason: string }).reason})`
  )

  const command = (heapMb: number, memoryBytes: number, uid: number | undefined, cgroup?: string) => {
    const node = [
      process.execPath,
      permission,
      ...files.readable.map((dir) => `--allow-fs-read=${dir}`),
      `--allow-fs-read=${GUEST}`,
      "--disallow-code-generation-from-strings",
      "--no-addons",
      "--no-warnings",
      `--max-old-space-size=${heapMb}`,
      GUEST
    ]
    const drop = uid === undefined ? [] : [`--reuid=${uid}`, `--regid=${uid}`, "--clear-groups"]
    const all = [
      // The first launcher moves itself into the guest's memory cgroup before it starts anything, so every process
      // of the chain is born in it (a move after the spawn would race the children already forked). The shell's own
      // PWD goes, so the guest's environment stays empty.
      ...(cgroup !== undefined ? ["/bin/sh", "-c", 'echo $$ > "$0/cgroup.procs" && unset PWD OLDPWD && exec "$@"', cgroup] : []),
      // The namespace's holder dies with the server; the guest (PID 1 of the namespace) dies with the holder, and
      // the kernel ends everything else in the namespace with it.
      ...(prefix.length > 0 ? ["setpriv", "--pdeathsig", "KILL", "--"] : []),
      ...prefix,
      "prlimit",
      `--data=${memoryBytes}:${memoryBytes}`,
      "--",
      "setpriv",
      ...drop,
      "--no-new-privs",
      "--pdeathsig",
      "KILL",
      "--",
      ...node
    ]
    return { file: all[0]!, args: all.slice(1) }
  }
  return {
    _tag: "Available",
    containment: { runtimes: files.runtimes, command, cgroups, ownUids: root, pidNamespace, layers }
  }
}

/** What `verifyGuest` found: the layers it saw in force, or the first it did not. */
export type GuestCheck =
  | { readonly _tag: "Verified"; readonly layers: ReadonlyArray<string> }
  | { readonly _tag: "Failed"; readonly reason: string }

const LAUNCHERS = new Set(["sh", "setpriv", "unshare", "prlimit"])

/** The guest's own process under the launch chain: the one process whose command is the guest script. */
export const guestProcess = (launcher: number): number | undefined => {
  const queue = [launcher]
  while (queue.length > 0) {
    const pid = queue.shift()!
    let cmdline = ""
    try {
      cmdline = Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8")
    } catch {
      continue
    }
    // The launchers before it (setpriv, unshare, prlimit) name the guest script too, as their command's argument.
    const args = cmdline.split("\0")
    if (args.includes(GUEST) && !LAUNCHERS.has(Path.basename(args[0] ?? ""))) return pid
    for (const task of safeList(`/proc/${pid}/task`)) {
      try {
        queue.push(...Fs.readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number))
      } catch {
        // The process ended meanwhile.
      }
    }
  }
  return undefined
}

const safeList = (dir: string) => {
  try {
    return Fs.readdirSync(dir)
  } catch {
    return []
  }
}

const field = (status: string, name: string) => new RegExp(`^${name}:[ \\t]*(.*)$`, "m").exec(status)?.[1]?.trim() ?? ""

/**
 * Looks at a live guest from the host (its /proc entries, which the guest cannot forge) and names each layer seen in
 * force: its uid, groups, capabilities, `no_new_privs`, its network and PID namespaces, its memory bound, its
 * environment. `/api/health` reports these, not the configuration.
 */
export const verifyGuest = (
  containment: Containment,
  pid: number,
  expected: {
    readonly uid: number | undefined
    readonly memoryBytes: number
    /** The guest's memory cgroup (its folder) and its bound, when the host gives guests one. */
    readonly cgroup?: { readonly folder: string; readonly bytes: number } | undefined
  }
): GuestCheck => {
  const failed = (reason: string): GuestCheck => ({ _tag: "Failed", reason })
  let status: string, limits: string, environ: string, netDev: string
  try {
    status = Fs.readFileSync(`/proc/${pid}/status`, "utf8")
    limits = Fs.readFileSync(`/proc/${pid}/limits`, "utf8")
    environ = Fs.readFileSync(`/proc/${pid}/environ`, "utf8")
    netDev = Fs.readFileSync(`/proc/${pid}/net/dev`, "utf8")
  } catch (error) {
    return failed(`the guest's /proc entries cannot be read: ${String(error)}`)
  }
  const layers = ["own process"]
  const names = environ.split("\0").filter(Boolean).map((entry) => entry.split("=")[0]!)
  const foreign = names.filter((name) => !name.startsWith("NODE_CHANNEL_"))
  if (foreign.length > 0) return failed(`the guest's environment holds ${foreign.join(", ")}`)
  layers.push("empty environment")
  const uids = field(status, "Uid").split(/\s+/).map(Number)
  if (expected.uid !== undefined) {
    if (!uids.every((uid) => uid === expected.uid)) return failed(`the guest runs as uid ${uids.join("/")}, not ${expected.uid}`)
    if (field(status, "Groups") !== "") return failed(`the guest has supplementary groups ${field(status, "Groups")}`)
    layers.push(`own uid ${expected.uid} (not root), no groups`)
  }
  if (/^0+$/.test(field(status, "CapEff")) === false) return failed(`the guest has capabilities ${field(status, "CapEff")}`)
  if (field(status, "NoNewPrivs") !== "1") return failed("the guest lacks no_new_privs")
  layers.push("no capabilities, no_new_privs")
  const interfaces = netDev.split("\n").slice(2).map((line) => line.split(":")[0]!.trim()).filter(Boolean)
  const sameNet = Fs.readlinkSync(`/proc/${pid}/ns/net`) === Fs.readlinkSync("/proc/self/ns/net")
  if (!sameNet) {
    if (interfaces.some((name) => name !== "lo")) return failed(`the guest's network namespace has ${interfaces.join(", ")}`)
    layers.push("network namespace (lo only)")
  } else if (containment.layers.includes("network namespace")) {
    return failed("the guest shares the server's network namespace")
  }
  const nspid = field(status, "NSpid").split(/\s+/)
  if (containment.pidNamespace) {
    if (Fs.readlinkSync(`/proc/${pid}/ns/pid`) === Fs.readlinkSync("/proc/self/ns/pid") || nspid.at(-1) !== "1") {
      return failed(`the guest is not PID 1 of a PID namespace of its own (NSpid ${nspid.join(" ")})`)
    }
    layers.push("PID namespace (PID 1)")
  }
  const data = /^Max data size\s+(\d+)\s+(\d+)/m.exec(limits)
  if (data === null || Number(data[1]) !== expected.memoryBytes || Number(data[2]) !== expected.memoryBytes) {
    return failed(`the guest's RLIMIT_DATA is ${data?.slice(1).join("/") ?? "unlimited"}, not ${expected.memoryBytes}`)
  }
  layers.push(`RLIMIT_DATA ${Math.round(expected.memoryBytes / 1048576)} MiB`)
  if (containment.cgroups !== undefined) {
    const group = groupOf(containment.cgroups, pid)
    if (expected.cgroup === undefined || group !== Path.basename(expected.cgroup.folder)) {
      return failed(`the guest is in the memory cgroup ${group ?? "none"}, not one of its own`)
    }
    const bound = containment.cgroups.limitOf(expected.cgroup.folder)
    if (bound === undefined || Math.abs(bound - expected.cgroup.bytes) > 4096) {
      return failed(`the guest's memory cgroup bounds ${bound ?? "nothing"}, not ${expected.cgroup.bytes}`)
    }
    layers.push(`memory cgroup ${Math.round(expected.cgroup.bytes / 1048576)} MiB`)
  }
  const cmdline = Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")
  if (!cmdline.some((arg) => arg === "--permission" || arg === "--experimental-permission")) {
    return failed("the guest runs without Node's permission model")
  }
  if (!cmdline.includes("--disallow-code-generation-from-strings")) return failed("the guest may compile code from strings")
  layers.push("Node permission model (runtime files only)", "no code from strings")
  return { _tag: "Verified", layers }
}
