import * as Os from "node:os"
import { Config } from "effect"
import { optionalString, setting } from "../../platform/Config.js"

/**
 * The sandbox's settings (README's table, docs/tools.md), read once when the sandbox layer is built. The defaults fit
 * the smallest machine we run on (2 cores, a few GiB): an end user runs one call at a time, an account two (one per
 * core pair on bigger machines), the process at most two per core, and live sandboxes share a memory budget.
 */

const MiB = 1024 * 1024
const cores = Math.max(1, Os.availableParallelism())

export const SandboxSettings = Config.all({
  timeMs: setting("SANDBOX_TIME_MS", Config.integer, 30_000),
  memoryBytes: Config.map(setting("SANDBOX_MEMORY_MB", Config.integer, 256), (mb) => mb * MiB),
  outputBytes: setting("SANDBOX_OUTPUT_BYTES", Config.integer, 1_000_000),
  fileBytes: setting("SANDBOX_FILE_BYTES", Config.integer, 10 * MiB),
  maxFiles: setting("SANDBOX_MAX_FILES", Config.integer, 1000),
  /** A Pyodide package index (a directory or URL holding a `pyodide-lock.json` and its wheels). */
  packageIndex: optionalString("SANDBOX_PACKAGE_INDEX"),
  /**
   * When the server is root, each guest runs as a uid (and gid) of its own from `uidBase` .. `uidBase + uidCount - 1`,
   * given back when it ends: no guest can signal or read another's process. The range must hold no real user.
   */
  uidBase: setting("SANDBOX_UID_BASE", Config.integer, 200_000),
  uidCount: setting("SANDBOX_UID_COUNT", Config.integer, 1000),
  /**
   * Without a network namespace the guest's process could open sockets if every other layer failed: `run_code`
   * refuses unless the operator accepts that here.
   */
  requireNetworkNamespace: setting("SANDBOX_REQUIRE_NETNS", Config.boolean, true),
  /**
   * Calls running at once for one end user of an account, for the account, and for the whole process. The account's
   * cap is above the end user's so that one end user's loop leaves room for the account's other end users.
   */
  runningPerEndUser: setting("SANDBOX_RUNNING_PER_END_USER", Config.integer, 1),
  runningPerAccount: setting("SANDBOX_RUNNING_PER_ACCOUNT", Config.integer, Math.max(2, Math.floor(cores / 2))),
  runningTotal: setting("SANDBOX_RUNNING_TOTAL", Config.integer, cores * 2),
  /**
   * Live sandboxes (running or idle) one end user, and one account, may hold; past either the least recently used
   * idle one of that end user (or account) goes.
   */
  livePerEndUser: setting("SANDBOX_LIVE_PER_END_USER", Config.integer, 2),
  livePerAccount: setting("SANDBOX_LIVE_PER_ACCOUNT", Config.integer, 4),
  /** What all live sandboxes may use together: each counts its memory limit plus its process's own overhead. */
  totalMemoryBytes: Config.map(
    setting("SANDBOX_TOTAL_MEMORY_MB", Config.integer, Math.max(1024, Math.min(8192, Math.floor(Os.totalmem() / MiB / 4)))),
    (mb) => mb * MiB
  ),
  /** How long a call waits for its turn under the caps before it fails as `sandbox_busy`. */
  queueMs: setting("SANDBOX_QUEUE_MS", Config.integer, 10_000)
}).pipe(
  Config.validate({
    message: "SANDBOX_* limits and caps must be positive, and no per-end-user cap above its per-account one",
    validation: (s) =>
      s.timeMs > 0 && s.memoryBytes > 0 && s.outputBytes > 0 && s.fileBytes > 0 && s.maxFiles > 0 &&
      s.runningPerEndUser > 0 && s.runningPerAccount > 0 && s.runningTotal > 0 && s.livePerEndUser > 0 &&
      s.livePerAccount > 0 && s.totalMemoryBytes > 0 && s.queueMs >= 0 && s.uidBase > 0 && s.uidCount > 0 &&
      s.runningPerEndUser <= s.runningPerAccount && s.livePerEndUser <= s.livePerAccount
  })
)
export type SandboxSettings = Config.Config.Success<typeof SandboxSettings>
