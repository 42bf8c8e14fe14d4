/**
 * The LangGraph.js dev server as a peer to measure Atrium against: installs this folder's pinned packages on demand
 * (`ensureInstalled`), starts `langgraphjs dev` (in-memory, analytics and tracing off) on a free port at 127.0.0.1
 * (`startLangGraph`), and drives its streaming endpoints the way bench clients drive Atrium's (`statelessRun`,
 * `createThread`, `threadRun`).
 *
 * Only node builtins and the root's bench/support.ts are imported here, so the root's bench scripts can import this
 * module without the @langchain packages being installed (they live in bench/peer-langgraph/node_modules, never in
 * the root's).
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Path from "node:path"
import { call, freePort, processCpu, untilAnswers } from "../support.js"

/** This folder. */
export const PEER_DIR = import.meta.dirname

/** The message every run sends, and the answer the graph's fake model streams back in exactly these 3 chunks. */
export const MESSAGE = "hello there, world of agents"
export const EXPECTED_CHUNKS: ReadonlyArray<string> = ["You said: hello ", "there, world of ", "agents"]

/** A keep-alive agent for the runs; pass your own to the run functions to size it differently. */
export const defaultAgent = new Http.Agent({ keepAlive: true, maxSockets: 1024 })

// ---------------------------------------------------------------------------------------------------------------------
// Install on demand

const CLI = Path.join(PEER_DIR, "node_modules", "@langchain", "langgraph-cli", "dist", "cli", "cli.mjs")

/** Whether every dependency of package.json is installed here at exactly its pinned version. */
const installed = (): boolean => {
  const pkg = JSON.parse(Fs.readFileSync(Path.join(PEER_DIR, "package.json"), "utf8")) as {
    dependencies: Record<string, string>
  }
  return Object.entries(pkg.dependencies).every(([name, version]) => {
    try {
      const file = Path.join(PEER_DIR, "node_modules", ...name.split("/"), "package.json")
      return (JSON.parse(Fs.readFileSync(file, "utf8")) as { version: string }).version === version
    } catch {
      return false
    }
  })
}

/**
 * Runs `npm ci` here (`npm install` without a lock file) when the pinned packages are not installed (or not at the
 * pinned versions). The root's `npm ci` never installs them: this folder is no workspace of the root.
 */
export const ensureInstalled = async (): Promise<void> => {
  if (installed()) return
  const hasLock = Fs.existsSync(Path.join(PEER_DIR, "package-lock.json"))
  const npm = process.platform === "win32" ? "npm.cmd" : "npm"
  const args = [hasLock ? "ci" : "install", "--no-audit", "--no-fund", "--loglevel=error"]
  process.stderr.write(`peer-langgraph: npm ${args.join(" ")} in ${PEER_DIR}\n`)
  await new Promise<void>((resolve, reject) => {
    const child = ChildProcess.spawn(npm, args, { cwd: PEER_DIR, stdio: ["ignore", "inherit", "inherit"] })
    child.once("error", reject)
    child.once("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`npm ${args[0]} in ${PEER_DIR} exited with ${code}`)))
  })
  if (!installed()) throw new Error(`the pinned packages are still missing after npm ${args[0]} in ${PEER_DIR}`)
}

// ---------------------------------------------------------------------------------------------------------------------
// Processes

/** Parent pid of a process, or undefined once it is gone (Linux /proc). */
const parentOf = (pid: number): number | undefined => {
  try {
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
  } catch {
    return undefined
  }
}

/** `root` and all its living descendants, parents first. */
export const processTree = (root: number): Array<number> => {
  const children = new Map<number, Array<number>>()
  for (const entry of Fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    const pid = Number(entry)
    const ppid = parentOf(pid)
    if (ppid === undefined) continue
    const list = children.get(ppid)
    if (list === undefined) children.set(ppid, [pid])
    else list.push(pid)
  }
  if (parentOf(root) === undefined) return []
  const out: Array<number> = []
  const queue = [root]
  while (queue.length > 0) {
    const pid = queue.shift()!
    out.push(pid)
    queue.push(...(children.get(pid) ?? []))
  }
  return out
}

/** utime + stime summed over processes (those gone count 0), in seconds. */
export const treeCpu = (pids: ReadonlyArray<number>): number =>
  pids.reduce((sum, pid) => {
    const cpu = processCpu(pid)
    return Number.isNaN(cpu) ? sum : sum + cpu
  }, 0)

/** The pid among `pids` holding the socket that listens on 127.0.0.1:`port` (Linux /proc/net/tcp + fd links). */
const listenerOf = (port: number, pids: ReadonlyArray<number>): number | undefined => {
  const inodes = new Set<string>()
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = ""
    try {
      text = Fs.readFileSync(file, "utf8")
    } catch {
      continue
    }
    for (const line of text.split("\n").slice(1)) {
      const cols = line.trim().split(/\s+/)
      if (cols.length < 10) continue
      const localPort = parseInt(cols[1]!.split(":")[1]!, 16)
      if (localPort === port && cols[3] === "0A") inodes.add(cols[9]!)
    }
  }
  for (const pid of pids) {
    let fds: Array<string> = []
    try {
      fds = Fs.readdirSync(`/proc/${pid}/fd`)
    } catch {
      continue
    }
    for (const fd of fds) {
      try {
        const match = /^socket:\[(\d+)\]$/.exec(Fs.readlinkSync(`/proc/${pid}/fd/${fd}`))
        if (match !== null && inodes.has(match[1]!)) return pid
      } catch {
        // the fd closed meanwhile
      }
    }
  }
  return undefined
}

export interface LangGraphOptions {
  /** `--n-jobs-per-worker`: runs the server executes at once (its queue workers). The CLI's default is 10. */
  readonly jobs?: number
  /** The dev server's file watching and restart (`tsx watch` around the server, chokidar on langgraph.json); on by
   * default, as `langgraphjs dev` runs. `false` passes `--no-reload`. */
  readonly reload?: boolean
  /** The server's LOG_LEVEL (its default is `debug`); `warn` like launchBenchPlatform gives Atrium. */
  readonly logLevel?: string
  /** Let the server's output through to this process's stderr (otherwise only its tail is kept, for errors). */
  readonly verbose?: boolean
  readonly env?: Record<string, string>
}

export interface LangGraphServer {
  readonly base: string
  readonly port: number
  /** The process that serves HTTP (owns the listening socket): the node process `tsx` runs the API server in. */
  readonly pid: number
  /** The whole process tree at start, parents first: CLI, `tsx watch` (with reload), the server, esbuild's service. */
  readonly pids: ReadonlyArray<number>
  /** The tree as it is now (a reload replaces the server process). */
  readonly tree: () => Array<number>
  /** CPU seconds (utime + stime) of the tree now, summed. */
  readonly cpu: () => number
  /** SIGTERM to the whole process group, SIGKILL after 5 s; resolves when no process of the tree is left. */
  readonly stop: () => Promise<void>
}

const STORE_DIR = Path.join(PEER_DIR, ".langgraph_api")

/**
 * Starts `langgraphjs dev` on a free port at 127.0.0.1 in a process group of its own, with analytics (the CLI's
 * LANGGRAPH_CLI_NO_ANALYTICS) and LangSmith tracing off and a fresh store, and resolves once GET /ok answers.
 */
export const startLangGraph = async (options: LangGraphOptions = {}): Promise<LangGraphServer> => {
  if (!Fs.existsSync(CLI)) throw new Error("bench/peer-langgraph is not installed: call ensureInstalled() first")
  // The dev server's "in-memory" store is snapshotted to .langgraph_api and read back at start: start empty.
  Fs.rmSync(STORE_DIR, { recursive: true, force: true })
  const port = await freePort()
  const env: Record<string, string> = { ...(process.env as Record<string, string>) }
  for (const key of Object.keys(env)) if (/^(LANGSMITH_|LANGCHAIN_|LANGGRAPH_)/.test(key)) delete env[key]
  Object.assign(env, {
    LANGGRAPH_CLI_NO_ANALYTICS: "1",
    LANGSMITH_TRACING: "false",
    LANGSMITH_TRACING_V2: "false",
    LANGCHAIN_TRACING: "false",
    LANGCHAIN_TRACING_V2: "false",
    BROWSER: "none",
    LOG_LEVEL: options.logLevel ?? "warn",
    FORCE_COLOR: "0"
  }, options.env)
  const args = [
    CLI, "dev",
    "--port", String(port),
    "--host", "127.0.0.1",
    "--no-browser",
    "--n-jobs-per-worker", String(options.jobs ?? 10),
    "--config", Path.join(PEER_DIR, "langgraph.json"),
    ...(options.reload === false ? ["--no-reload"] : [])
  ]
  const child = ChildProcess.spawn(process.execPath, args, {
    cwd: PEER_DIR,
    env,
    detached: true, // a process group of its own, so that stop() reaches every descendant
    stdio: ["ignore", "pipe", "pipe"]
  })
  const group = child.pid!
  let output = ""
  const onOutput = (chunk: Buffer) => {
    if (options.verbose === true) process.stderr.write(chunk)
    output = (output + chunk.toString("utf8")).slice(-8000)
  }
  child.stdout!.on("data", onOutput)
  child.stderr!.on("data", onOutput)
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  // Never leave the group behind, even when the caller dies without calling stop().
  const killOnExit = () => {
    try {
      process.kill(-group, "SIGKILL")
    } catch {
      // gone already
    }
  }
  process.once("exit", killOnExit)

  const groupAlive = () => {
    try {
      process.kill(-group, 0)
      return true
    } catch {
      return false
    }
  }
  const stop = async () => {
    try {
      process.kill(-group, "SIGTERM")
    } catch {
      // gone already
    }
    const deadline = Date.now() + 5000
    while (groupAlive() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    if (groupAlive()) {
      try {
        process.kill(-group, "SIGKILL")
      } catch {
        // gone meanwhile
      }
      while (groupAlive()) await new Promise((r) => setTimeout(r, 50))
    }
    await exited
    process.removeListener("exit", killOnExit)
    Fs.rmSync(STORE_DIR, { recursive: true, force: true })
  }

  const base = `http://127.0.0.1:${port}`
  try {
    await untilAnswers(base, "/ok", {
      tries: 600,
      gone: () => child.exitCode !== null || child.signalCode !== null,
      what: "the LangGraph dev server",
      detail: () => output
    })
  } catch (error) {
    await stop()
    throw error
  }
  const pids = processTree(group)
  const pid = listenerOf(port, pids)
  if (pid === undefined) {
    await stop()
    throw new Error(`no process of the tree ${pids.join(",")} listens on port ${port}`)
  }
  const tree = () => processTree(group)
  return { base, port, pid, pids, tree, cpu: () => treeCpu(tree()), stop }
}

// ---------------------------------------------------------------------------------------------------------------------
// Requests

/** One streamed run. Times are milliseconds from sending the request. */
export interface Timing {
  /** Status 200, the stream ended normally, no `error` event, and the model's text came as EXPECTED_CHUNKS. */
  readonly ok: boolean
  readonly status: number
  /** The first SSE event (LangGraph's `metadata`, sent once a queue worker has picked the run up). */
  readonly firstEvent: number
  /** The first event carrying model text (a `messages` event of stream mode `messages-tuple`). */
  readonly firstToken: number
  /** The last event carrying model text. */
  readonly lastToken: number
  /** The end of the response (the stream closed). */
  readonly total: number
  /** total − lastToken: how long the stream stays open after the answer is complete. */
  readonly tail: number
  readonly events: number
  readonly chunks: ReadonlyArray<string>
  readonly error?: string
}

/** The run body: the user message, streamed as `messages-tuple` (one `messages` event per model chunk). */
export const runBody = (message = MESSAGE) => ({
  assistant_id: "agent",
  input: { messages: [{ role: "user", content: message }] },
  stream_mode: ["messages-tuple"]
})

const streamRun = (agent: Http.Agent, base: string, path: string, body: unknown) =>
  new Promise<Timing>((resolve) => {
    const payload = JSON.stringify(body)
    const t0 = performance.now()
    let status = 0
    let firstEvent = NaN
    let firstToken = NaN
    let lastToken = NaN
    let events = 0
    let error: string | undefined
    const chunks: Array<string> = []
    let buffer = ""
    let settled = false
    const finish = (ended: boolean, reason?: string) => {
      if (settled) return
      settled = true
      if (reason !== undefined && error === undefined) error = reason
      const total = performance.now() - t0
      const ok = ended && status === 200 && error === undefined &&
        chunks.length === EXPECTED_CHUNKS.length && chunks.every((c, i) => c === EXPECTED_CHUNKS[i])
      resolve({
        ok, status, firstEvent, firstToken, lastToken, total, tail: total - lastToken, events, chunks,
        ...(error !== undefined ? { error } : {})
      })
    }
    const onBlock = (block: string, at: number) => {
      let event = "message"
      const data: Array<string> = []
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim()
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""))
      }
      if (data.length === 0 && event === "message") return
      events++
      if (Number.isNaN(firstEvent)) firstEvent = at
      if (event === "error") {
        error = data.join("\n")
      } else if (event === "messages") {
        try {
          const [chunk] = JSON.parse(data.join("\n")) as [{ content?: unknown; type?: string }, unknown]
          if (typeof chunk?.content === "string" && chunk.content.length > 0) {
            chunks.push(chunk.content)
            if (Number.isNaN(firstToken)) firstToken = at
            lastToken = at
          }
        } catch (cause) {
          error = `unparsable messages event: ${String(cause)}`
        }
      }
    }
    const req = Http.request(new URL(path, base), {
      method: "POST",
      agent,
      headers: {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(payload),
        accept: "text/event-stream"
      }
    }, (response) => {
      status = response.statusCode ?? 0
      response.setEncoding("utf8")
      response.on("data", (chunk: string) => {
        const at = performance.now() - t0
        buffer += chunk.replace(/\r\n/g, "\n")
        let end: number
        while ((end = buffer.indexOf("\n\n")) !== -1) {
          onBlock(buffer.slice(0, end), at)
          buffer = buffer.slice(end + 2)
        }
      })
      response.on("end", () => {
        if (buffer.trim().length > 0) onBlock(buffer, performance.now() - t0)
        finish(true, status === 200 ? undefined : `status ${status}`)
      })
      response.on("aborted", () => finish(false, "aborted"))
      response.on("error", (e) => finish(false, e.message))
    })
    req.on("error", (e) => finish(false, e.message))
    req.end(payload)
  })

/** A stateless run: POST /runs/stream (the server makes a temporary thread and deletes it afterwards). */
export const statelessRun = (base: string, agent: Http.Agent = defaultAgent, message = MESSAGE): Promise<Timing> =>
  streamRun(agent, base, "/runs/stream", runBody(message))

/** POST /threads: a new thread, its id. */
export const createThread = async (base: string, agent: Http.Agent = defaultAgent): Promise<string> => {
  const response = await call(agent, base, "POST", "/threads", {})
  if (response.status !== 200) throw new Error(`POST /threads: ${response.status} ${JSON.stringify(response.body)}`)
  return (response.body as { thread_id: string }).thread_id
}

/** A run on a thread: POST /threads/{id}/runs/stream; the thread's messages grow with every run, like a session. */
export const threadRun = (
  base: string,
  threadId: string,
  agent: Http.Agent = defaultAgent,
  message = MESSAGE
): Promise<Timing> => streamRun(agent, base, `/threads/${threadId}/runs/stream`, runBody(message))
