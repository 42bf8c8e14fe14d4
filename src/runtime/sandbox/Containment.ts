import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import type { SandboxSettings } from "./Config.js"

/**
 * How a guest process is started, decided once at start (docs/tools.md, "Containment"). Each layer stands alone, so
 * breaking one gives nothing:
 * - its own OS process, talking to the host over the IPC channel only, killed if the server dies (`--pdeathsig`);
 * - an empty environment and an empty working directory of its own;
 * - an unprivileged uid/gid without supplementary groups when the server is root (`SANDBOX_USER`);
 * - no network: a network namespace of its own (`unshare --net`, or `--user --net` for a non-root server);
 * - Node's permission model: it may read only the guest script and the runtimes' package files; no child processes,
 *   workers, addons, WASI or inspector; no code compiled from strings (`eval`, `Function`).
 * Where a layer cannot be had, the containment is unavailable with the reason, and `run_code` refuses (fails closed).
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
  /** The command that starts one guest in `cwd`, and the owner its working directory gets. */
  readonly command: (heapMb: number) => { readonly file: string; readonly args: ReadonlyArray<string> }
  readonly owner: { readonly uid: number; readonly gid: number } | undefined
  /** The layers in force, for the start-up log and `/api/health`. */
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

/** `SANDBOX_USER` as ids: a name from /etc/passwd, or `uid:gid`. */
const userIds = (user: string): { uid: number; gid: number } | string => {
  const numeric = /^(\d+):(\d+)$/.exec(user)
  if (numeric !== null) return { uid: Number(numeric[1]), gid: Number(numeric[2]) }
  const line = Fs.readFileSync("/etc/passwd", "utf8").split("\n").find((entry) => entry.split(":")[0] === user)
  if (line === undefined) return `SANDBOX_USER ${user} is not in /etc/passwd`
  const [, , uid, gid] = line.split(":")
  return { uid: Number(uid), gid: Number(gid) }
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
  let owner: { uid: number; gid: number } | undefined
  if (root) {
    const ids = userIds(settings.user)
    if (typeof ids === "string") return unavailable(ids)
    if (ids.uid === 0 || ids.gid === 0) return unavailable(`SANDBOX_USER ${settings.user} is root; name an unprivileged user`)
    owner = ids
  }

  const layers = ["own process", "empty environment", "own empty working directory"]
  const namespace = root ? ["--net"] : ["--user", "--net"]
  let prefix: Array<string>
  if (succeeds("unshare", [...namespace, "true"])) {
    prefix = ["unshare", ...namespace, "--"]
    layers.push("network namespace")
  } else if (settings.requireNetworkNamespace) {
    return unavailable(
      "no network namespace can be made here (unshare --net failed: a container without CAP_SYS_ADMIN or user " +
        "namespaces?); set SANDBOX_REQUIRE_NETNS=false to run code without one"
    )
  } else {
    prefix = []
    layers.push("NO network namespace (SANDBOX_REQUIRE_NETNS=false)")
  }
  const drop = owner === undefined
    ? []
    : [`--reuid=${owner.uid}`, `--regid=${owner.gid}`, "--clear-groups"]
  if (owner !== undefined) layers.push(`uid ${owner.uid} gid ${owner.gid}`)
  layers.push("Node permission model (runtime files only)", "no code from strings")

  const command = (heapMb: number) => {
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
    const all = [...prefix, "setpriv", ...drop, "--no-new-privs", "--pdeathsig", "KILL", "--", ...node]
    return { file: all[0]!, args: all.slice(1) }
  }
  return { _tag: "Available", containment: { runtimes: files.runtimes, command, owner, layers } }
}
