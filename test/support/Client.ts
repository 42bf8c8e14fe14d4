import { solveChallenge } from "altcha-lib"
import { Effect } from "effect"
import { pollUntil } from "./Poll.js"
import { TEST_CODE, TEST_PHONE, TestServer } from "./TestServer.js"

/** A real HTTP response, read whole. */
export interface Reply {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  /** The parsed JSON body (undefined when the body is not JSON). */
  readonly body: any
}

export interface RequestOptions {
  readonly body?: unknown
  /** Sent as `Authorization: Bearer <token>`. */
  readonly token?: string
  readonly headers?: Record<string, string>
  /** A raw body, sent as is (with `content-type: application/json` unless headers say otherwise). */
  readonly raw?: string | Uint8Array
}

/** One request against a server at `base` with Node's own fetch: nothing of ours between test and server. */
export const requestAt = (base: string, method: string, path: string, options: RequestOptions = {}) =>
  Effect.promise(async (): Promise<Reply> => {
    const headers: Record<string, string> = { ...options.headers }
    if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`
    let body: string | Uint8Array | undefined
    if (options.raw !== undefined) body = options.raw
    else if (options.body !== undefined) body = JSON.stringify(options.body)
    if (body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === "content-type")) {
      headers["content-type"] = "application/json"
    }
    const response = await fetch(base + path, { method, headers, ...(body !== undefined ? { body } : {}) })
    const text = await response.text()
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {
      parsed = undefined
    }
    return { status: response.status, headers: response.headers, text, body: parsed }
  })

/** A request against the file's `TestServer`. */
export const request = (method: string, path: string, options: RequestOptions = {}) =>
  Effect.flatMap(TestServer, (server) => requestAt(server.url, method, path, options))

/** A phone number no other test uses, so cooldowns and caps never collide. */
export const freshPhone = () => `+1555${Math.floor(Math.random() * 1e7).toString().padStart(7, "0")}`

/** Logs in the fixed test number (SMS_TEST_OTP) and returns its token. */
export const loginTestUser = (phone = TEST_PHONE, code = TEST_CODE) =>
  Effect.gen(function*() {
    const reply = yield* request("POST", "/api/auth/login", { body: { phone, code } })
    if (reply.status !== 200) throw new Error(`login failed: ${reply.status} ${reply.text}`)
    return reply.body.token as string
  })

/**
 * A solution of a fresh `GET /api/auth/challenge`, as the ALTCHA widget sends it (base64 JSON), found with
 * `altcha-lib`'s own solver.
 */
export const solvedChallenge = (base: string) =>
  Effect.gen(function*() {
    const reply = yield* requestAt(base, "GET", "/api/auth/challenge")
    if (reply.status !== 200) throw new Error(`challenge: ${reply.status} ${reply.text}`)
    const { algorithm, challenge, maxnumber, salt, signature } = reply.body
    const solution = yield* Effect.promise(() => solveChallenge(challenge, salt, algorithm, maxnumber).promise)
    if (solution === null) throw new Error("the challenge has no solution under its maxnumber")
    const payload = { algorithm, challenge, number: solution.number, salt, signature }
    return Buffer.from(JSON.stringify(payload)).toString("base64")
  })

/** Logs in a new user through a real code sent to the SMS inbox. */
export const loginWithSms = (phone = freshPhone()) =>
  Effect.gen(function*() {
    const server = yield* TestServer
    let sent = yield* request("POST", "/api/auth/sms/sendCode", { body: { phone } })
    // Past SMS_CHALLENGE_AFTER codes from this address, a real client solves the login page's proof of work.
    if (sent.status === 403 && sent.body?.error?.type === "challenge_required") {
      sent = yield* request("POST", "/api/auth/sms/sendCode", { body: { phone, challenge: yield* solvedChallenge(server.url) } })
    }
    if (sent.status !== 200) throw new Error(`sendCode failed: ${sent.status} ${sent.text}`)
    const code = yield* server.inbox.codeFor(phone)
    const reply = yield* request("POST", "/api/auth/login", { body: { phone, code } })
    if (reply.status !== 200) throw new Error(`login failed: ${reply.status} ${reply.text}`)
    return { phone, token: reply.body.token as string, newUser: reply.body.newUser as boolean }
  })

/** Creates an API key for the holder of `token` and returns the key. */
export const createApiKey = (token: string, name = "test") =>
  Effect.gen(function*() {
    const reply = yield* request("POST", "/api/user/apiKey/create", { token, body: { name } })
    if (reply.status !== 200) throw new Error(`apiKey/create failed: ${reply.status} ${reply.text}`)
    return reply.body as { id: string; key: string; name: string; created_at: string }
  })

/**
 * `run_code`'s status in `/api/health` once the start-up self-check has answered (it says `checking` until then,
 * for the second or two a guest takes to start).
 */
export const runCodeCapability = pollUntil(
  Effect.map(request("GET", "/api/health"), (health) => health.body?.capabilities?.run_code as { status: string; detail: string }),
  // Polled: the server checks run_code in the background at start and tells only through /api/health.
  (status) => status?.status !== "checking",
  "run_code's start-up self-check answered",
  { every: 200, within: 120_000 }
)
