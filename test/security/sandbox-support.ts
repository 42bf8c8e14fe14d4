import { assert } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { request } from "../support/Client.js"
import { launchPlatform } from "../support/Process.js"
import { streamOf } from "../support/Sse.js"
import { seedDataDir } from "../support/Templates.js"
import { TestServer } from "../support/TestServer.js"

/**
 * What the sandbox's security tests share (issue 24): `dist/main.js` as a process with the platform's secrets set to
 * values the tests know, a host world the guest must not reach (a secret file, a directory anyone may write in, a
 * listener on 127.0.0.1), and `run_code` called through a session turn.
 */

export const secret = (name: string) => `${name}-${Crypto.randomBytes(12).toString("hex")}`
export const INTERNAL_TOKEN = secret("internal")
export const SECRETS_KEY = secret("secretskey")
export const JWT_SECRET = secret("jwt-secret-jwt-secret-jwt-secret")
export const PHONE_A = "+15551230001"
export const PHONE_B = "+15551230002"
export const CODE = "246810"

export const TOOLS = [{ name: "run_code", permission: "allow" }]

/** A host world the guest must not reach: a secret file, a directory anyone may write in, a listener. */
export const makeHost = Effect.acquireRelease(
  Effect.promise(async () => {
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "atrium-escape-"))
    Fs.chmodSync(dir, 0o755)
    const hostFile = Path.join(dir, "host-secret.txt")
    const hostContent = secret("HOSTFILE")
    Fs.writeFileSync(hostFile, hostContent, { mode: 0o644 })
    const markers = Path.join(dir, "markers")
    Fs.mkdirSync(markers)
    Fs.chmodSync(markers, 0o777)
    const connections: Array<string> = []
    const listener = Net.createServer((socket) => {
      connections.push(`${socket.remoteAddress}:${socket.remotePort}`)
      socket.destroy()
    })
    await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve))
    const port = (listener.address() as Net.AddressInfo).port
    const dataDir = Path.join(dir, "data")
    await seedDataDir(dataDir)
    return { dir, hostFile, hostContent, markers, connections, listener, port, dataDir }
  }),
  (host) =>
    Effect.promise(async () => {
      await new Promise((resolve) => host.listener.close(resolve))
      Fs.rmSync(host.dir, { recursive: true, force: true })
    })
)

/** The platform from `dist/`, its helpers (`request`, `streamOf`) pointed at it. */
export const platform = (env: Record<string, string>) =>
  Layer.scoped(
    TestServer,
    Effect.gen(function*() {
      const host = yield* makeHost
      const process = yield* launchPlatform({
        DATA_DIR: host.dataDir,
        INTERNAL_TOKEN,
        SECRETS_KEY,
        JWT_SECRET,
        SMS_TEST_OTP: `${PHONE_A}=${CODE},${PHONE_B}=${CODE}`,
        ...env
      })
      hosts.set(process.url, { ...host, output: process.output, pid: process.pid })
      return {
        url: process.url,
        inbox: undefined as never,
        query: () => Effect.die("a process's database is its own")
      }
    })
  )
export const hosts = new Map<string, Effect.Effect.Success<typeof makeHost> & { output: () => string; pid: number }>()
export const hostOf = Effect.map(TestServer, (server) => hosts.get(server.url)!)

export const login = (phone: string) =>
  Effect.gen(function*() {
    const reply = yield* request("POST", "/api/auth/login", { body: { phone, code: CODE } })
    assert.strictEqual(reply.status, 200, reply.text)
    return reply.body.token as string
  })

/**
 * A session with a `run_code` agent. `as` opens it for an end user of the account instead (an API key and its
 * `X-End-User-Id`): the agent is the account's, the session the end user's.
 */
export const sessionFor = (token: string, as?: EndUser) =>
  Effect.gen(function*() {
    const agent = yield* request("POST", "/v1/agents", {
      token,
      body: { name: `Probe ${Math.random().toString(36).slice(2, 8)}`, instructions: "Run the code.", tools: TOOLS }
    })
    assert.strictEqual(agent.status, 201, agent.text)
    const session = yield* request("POST", "/v1/sessions", {
      token: as?.key ?? token,
      body: { agent: agent.body.identifier },
      headers: as?.headers ?? {}
    })
    assert.strictEqual(session.status, 201, session.text)
    return session.body.id as string
  })

/** One `run_code` call through a session turn: everything the platform said about it, as text. */
/** An end user of an account, as a developer's backend calls for it: the account's API key and the end user's id. */
export interface EndUser {
  readonly key: string
  readonly headers: Record<string, string>
}

export const runCode = (token: string, session: string, language: "python" | "javascript", code: string, as?: EndUser) =>
  Effect.gen(function*() {
    const stream = yield* streamOf(`/v1/sessions/${session}/events`, {
      token: as?.key ?? token,
      headers: as?.headers ?? {},
      body: { type: "message", message: `/tool run_code ${JSON.stringify({ language, code })}` }
    })
    const result = stream.events.find((e) => e.event === "tool_call.result")?.data.output
    const failure = stream.events.find((e) => e.event === "tool_call.failed")?.data.error as string | undefined
    // What the guest's code produced (its result or its failure), apart from the events that echo the code itself.
    return { raw: JSON.stringify({ result, failure }), result, failure }
  })

export const balanceOf = (token: string) =>
  Effect.map(request("GET", "/api/wallet", { token }), (reply) => Number(reply.body?.balance))


/** What the host sees of one live guest process under the platform: read from /proc, which the guest cannot forge. */
export interface LiveGuest {
  readonly pid: number
  readonly environ: string
  readonly status: string
  readonly limits: string
}

/** The platform's live guest processes (each one's command is the guest script), found below its process. */
export const liveGuests = (platformPid: number): Array<LiveGuest> => {
  const found: Array<LiveGuest> = []
  const queue = [platformPid]
  while (queue.length > 0) {
    const pid = queue.shift()!
    try {
      const cmdline = Fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")
      // The launchers before the guest (setpriv, unshare, prlimit) name its script too, as their command's argument.
      if (cmdline.some((arg) => arg.endsWith("/guest.mjs")) && !/(^|\/)(setpriv|unshare|prlimit)$/.test(cmdline[0]!)) {
        found.push({
          pid,
          environ: Fs.readFileSync(`/proc/${pid}/environ`, "utf8"),
          status: Fs.readFileSync(`/proc/${pid}/status`, "utf8"),
          limits: Fs.readFileSync(`/proc/${pid}/limits`, "utf8")
        })
        continue
      }
      for (const task of Fs.readdirSync(`/proc/${pid}/task`)) {
        queue.push(...Fs.readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number))
      }
    } catch {
      // Ended meanwhile.
    }
  }
  return found
}
