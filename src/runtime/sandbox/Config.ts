import * as Os from "node:os"
import { Config, Option } from "effect"

/**
 * The sandbox's settings (README's table, docs/tools.md), read once when the sandbox layer is built. The defaults fit
 * the smallest machine we run on (2 cores, a few GiB): one account runs one call at a time per core pair, the
 * process runs at most two calls per core, and live sandboxes share a memory budget.
 */

const MiB = 1024 * 1024
const cores = Math.max(1, Os.availableParallelism())

/** A setting written as `NAME=` (as an env file writes it) counts as unset. */
const optionalText = (name: string) =>
  Config.option(Config.string(name)).pipe(Config.map(Option.filter((value) => value.trim().length > 0)))

export const SandboxSettings = Config.all({
  timeMs: Config.integer("SANDBOX_TIME_MS").pipe(Config.withDefault(30_000)),
  memoryBytes: Config.map(Config.integer("SANDBOX_MEMORY_MB").pipe(Config.withDefault(256)), (mb) => mb * MiB),
  outputBytes: Config.integer("SANDBOX_OUTPUT_BYTES").pipe(Config.withDefault(1_000_000)),
  fileBytes: Config.integer("SANDBOX_FILE_BYTES").pipe(Config.withDefault(10 * MiB)),
  maxFiles: Config.integer("SANDBOX_MAX_FILES").pipe(Config.withDefault(1000)),
  /** A Pyodide package index (a directory or URL holding a `pyodide-lock.json` and its wheels). */
  packageIndex: optionalText("SANDBOX_PACKAGE_INDEX"),
  /** Who the guest runs as when the server is root: a user name or `uid:gid`. */
  user: Config.string("SANDBOX_USER").pipe(Config.withDefault("nobody")),
  /**
   * Without a network namespace the guest's process could open sockets if every other layer failed: `run_code`
   * refuses unless the operator accepts that here.
   */
  requireNetworkNamespace: Config.boolean("SANDBOX_REQUIRE_NETNS").pipe(Config.withDefault(true)),
  /** Calls running at once for one account, and for the whole process. */
  runningPerAccount: Config.integer("SANDBOX_RUNNING_PER_ACCOUNT").pipe(
    Config.withDefault(Math.max(1, Math.floor(cores / 2)))
  ),
  runningTotal: Config.integer("SANDBOX_RUNNING_TOTAL").pipe(Config.withDefault(cores * 2)),
  /** Live sandboxes (running or idle) one account may hold; past it the account's least recently used idle one goes. */
  livePerAccount: Config.integer("SANDBOX_LIVE_PER_ACCOUNT").pipe(Config.withDefault(4)),
  /** What all live sandboxes may use together: each counts its memory limit plus its process's own overhead. */
  totalMemoryBytes: Config.map(
    Config.integer("SANDBOX_TOTAL_MEMORY_MB").pipe(
      Config.withDefault(Math.max(1024, Math.min(8192, Math.floor(Os.totalmem() / MiB / 4))))
    ),
    (mb) => mb * MiB
  ),
  /** How long a call waits for its turn under the caps before it fails as `sandbox_busy`. */
  queueMs: Config.integer("SANDBOX_QUEUE_MS").pipe(Config.withDefault(10_000))
}).pipe(
  Config.validate({
    message: "SANDBOX_* limits and caps must be positive",
    validation: (s) =>
      s.timeMs > 0 && s.memoryBytes > 0 && s.outputBytes > 0 && s.fileBytes > 0 && s.maxFiles > 0 &&
      s.runningPerAccount > 0 && s.runningTotal > 0 && s.livePerAccount > 0 && s.totalMemoryBytes > 0 && s.queueMs >= 0
  })
)
export type SandboxSettings = Config.Config.Success<typeof SandboxSettings>
