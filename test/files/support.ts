import { assert } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import { createApiKey, loginWithSms, type Reply, request } from "../support/Client.js"
import { makeSmsInbox, makeMigratedStorage, servicesMode, startServer, TestServer } from "../support/TestServer.js"

/**
 * The server of the files and environments tests: the real platform on a random port (as `TestServer.layer`), with
 * its data directory and its database in view.
 *
 * - Object storage is embedded, under `DATA_DIR/objects`. In services mode `makeMigratedStorage` gives the server no data
 *   directory (it would use `./data`), so it gets a temporary one here.
 * - `ServerSql` runs SQL on the server's own database (PGlite answers only its server; PostgreSQL is the same
 *   client): the environments test uses it to stand in for sessions, which do not exist yet.
 */

export interface ServerSqlService {
  readonly query: (text: string) => Effect.Effect<ReadonlyArray<Record<string, unknown>>>
}
export class ServerSql extends Context.Tag("test/files/ServerSql")<ServerSql, ServerSqlService>() {}

export class DataDir extends Context.Tag("test/files/DataDir")<DataDir, string>() {}

/** Options for `layer(...)`: the server's URLs expire on the real clock. */
export const LIVE = { excludeTestServices: true } as const

export const serverWith = (env: Record<string, string> = {}) =>
  Layer.scopedContext(Effect.gen(function*() {
    const storage = yield* makeMigratedStorage
    const inbox = yield* makeSmsInbox
    const ownDataDir = servicesMode
      ? yield* Effect.acquireRelease(
        Effect.promise(() => Fs.mkdtemp(Path.join(Os.tmpdir(), "atrium-files-"))),
        (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true })).pipe(Effect.ignore)
      )
      : undefined
    const settings: Record<string, string> = {
      SMS_IP_HOURLY_LIMIT: "100000",
      SMS_DAILY_LIMIT: "1000",
      // Stated, not assumed: the API takes no body over 1 MiB, and files are far larger.
      MAX_BODY_BYTES: String(1024 * 1024),
      ...(ownDataDir !== undefined ? { DATA_DIR: ownDataDir } : {}),
      ...env
    }
    const server = yield* startServer(storage, inbox, settings)
    return Context.make(TestServer, server).pipe(
      Context.add(ServerSql, { query: server.query }),
      Context.add(DataDir, settings.DATA_DIR ?? storage.env.DATA_DIR!)
    )
  }))

/** The platform's one error body, `{"error":{"type","message"}}`, and nothing else. */
export const assertError = (reply: Reply, status: number, type: string) => {
  assert.strictEqual(reply.status, status, reply.text)
  assert.deepStrictEqual(Object.keys(reply.body ?? {}), ["error"], reply.text)
  assert.strictEqual(reply.body.error.type, type, reply.text)
  assert.isString(reply.body.error.message)
}

/** A caller of `/v1`: its headers (API key and end user, or a login token). */
export interface Caller {
  readonly headers: Record<string, string>
}

/** A new account, logged in; its login token calls `/v1` without an end user. */
export const newAccount = Effect.gen(function*() {
  const { token } = yield* loginWithSms()
  const key = yield* createApiKey(token, "files")
  const asEndUser = (endUserId: string): Caller => ({
    headers: { authorization: `Bearer ${key.key}`, "x-end-user-id": endUserId }
  })
  return { token, key: key.key, asEndUser, asLogin: { headers: { authorization: `Bearer ${token}` } } as Caller }
})

export const call = (caller: Caller, method: string, path: string, body?: unknown) =>
  request(method, path, { headers: caller.headers, ...(body !== undefined ? { body } : {}) })

export const sha256 = (bytes: Uint8Array | string) => Crypto.createHash("sha256").update(bytes).digest("hex")

/** A raw request to a storage URL with Node's fetch (no API client: the URL is all the client needs). */
export const fetchUrl = (url: string, init: RequestInit & { duplex?: "half" } = {}) =>
  Effect.promise(async () => {
    const response = await fetch(url, init)
    const bytes = new Uint8Array(await response.arrayBuffer())
    const text = new TextDecoder().decode(bytes)
    let body: any
    try {
      body = JSON.parse(text)
    } catch {
      body = undefined
    }
    return { status: response.status, headers: response.headers, bytes, text, body }
  })

/** Both steps of an upload of `bytes`: the URL, the PUT, the registration. Returns the file record. */
export const upload = (
  caller: Caller,
  bytes: Uint8Array,
  options: { readonly filename?: string; readonly contentType?: string } = {}
) =>
  Effect.gen(function*() {
    const contentType = options.contentType ?? "application/octet-stream"
    const ticket = yield* call(caller, "POST", "/v1/files/upload-url", {
      filename: options.filename ?? "data.bin",
      content_type: contentType,
      size: bytes.length
    })
    assert.strictEqual(ticket.status, 200, ticket.text)
    const put = yield* fetchUrl(ticket.body.upload_url, { method: "PUT", headers: ticket.body.headers, body: bytes })
    assert.strictEqual(put.status, 200, put.text)
    const registered = yield* call(caller, "POST", "/v1/files", { upload_id: ticket.body.upload_id })
    assert.strictEqual(registered.status, 201, registered.text)
    return registered.body as {
      id: string
      filename: string
      content_type: string
      size: number
      sha256: string
      created_at: string
    }
  })
