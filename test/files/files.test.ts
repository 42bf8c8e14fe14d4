import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Http from "node:http"
import * as Path from "node:path"
import { request } from "../support/Client.js"
import { pollUntil } from "../support/Poll.js"
import {
  assertError,
  call,
  DataDir,
  fetchUrl,
  LIVE,
  newAccount,
  serverWith,
  sha256,
  upload
} from "./support.js"

/**
 * Files (spec 4.5; issue 4 items 8-9) over real HTTP: the two-step upload, the storage route's signatures, the API
 * body limit that file bytes are not subject to, and the partition of files per account and end user.
 */

const MiB = 1024 * 1024

/** Every object file the embedded store holds. */
const storedObjects = Effect.flatMap(DataDir, (dir) =>
  Effect.promise(async () => {
    const root = Path.join(dir, "objects")
    const found: Array<string> = []
    const walk = async (at: string): Promise<void> => {
      for (const entry of await Fs.readdir(at, { withFileTypes: true }).catch(() => [])) {
        if (entry.name === ".tmp") continue
        if (entry.isDirectory()) await walk(Path.join(at, entry.name))
        else if (entry.name === "data") found.push(at)
      }
    }
    await walk(root)
    return found.map((p) => Path.basename(p))
  }))

/** A URL with one query parameter changed. */
const withParam = (url: string, name: string, value: string) => {
  const parsed = new URL(url)
  parsed.searchParams.set(name, value)
  return parsed.toString()
}

describe("files", () => {
  layer(serverWith(), LIVE)((it) => {
    it.effect("two steps: upload URL, PUT to storage, register; then the record and a download URL", () =>
      Effect.gen(function*() {
        const account = yield* newAccount
        const alice = account.asEndUser("alice")
        const bytes = new TextEncoder().encode("hello, files\n")
        const ticket = yield* call(alice, "POST", "/v1/files/upload-url", {
          filename: "hello.txt",
          content_type: "text/plain",
          size: bytes.length
        })
        assert.strictEqual(ticket.status, 200, ticket.text)
        assert.deepStrictEqual(Object.keys(ticket.body).sort(), ["expires_at", "headers", "method", "upload_id", "upload_url"])
        assert.match(ticket.body.upload_id, /^upl_[A-Za-z0-9]+$/)
        assert.strictEqual(ticket.body.method, "PUT")
        assert.deepStrictEqual(ticket.body.headers, { "Content-Type": "text/plain" })
        // The bytes do not go to the API: the URL is the storage route's, signed and expiring in about an hour.
        const url = new URL(ticket.body.upload_url)
        assert.match(url.pathname, /^\/storage\/obj_[A-Za-z0-9]{32}$/)
        assert.isString(url.searchParams.get("signature"))
        const expiresIn = new Date(ticket.body.expires_at).getTime() - Date.now()
        assert.isAbove(expiresIn, 59 * 60_000)
        assert.isAtMost(expiresIn, 60 * 60_000)

        const put = yield* fetchUrl(ticket.body.upload_url, { method: "PUT", headers: ticket.body.headers, body: bytes })
        assert.strictEqual(put.status, 200, put.text)
        assert.deepStrictEqual(put.body, { size: bytes.length, sha256: sha256(bytes) })

        const registered = yield* call(alice, "POST", "/v1/files", { upload_id: ticket.body.upload_id })
        assert.strictEqual(registered.status, 201, registered.text)
        assert.deepStrictEqual(Object.keys(registered.body).sort(), ["content_type", "created_at", "filename", "id", "sha256", "size"])
        assert.match(registered.body.id, /^file_[A-Za-z0-9]+$/)
        assert.strictEqual(registered.body.filename, "hello.txt")
        assert.strictEqual(registered.body.content_type, "text/plain")
        assert.strictEqual(registered.body.size, bytes.length)
        assert.strictEqual(registered.body.sha256, sha256(bytes))
        assert.strictEqual(new Date(registered.body.created_at).toISOString(), registered.body.created_at)

        // An upload is registered once.
        const again = yield* call(alice, "POST", "/v1/files", { upload_id: ticket.body.upload_id })
        assertError(again, 404, "not_found")

        const record = yield* call(alice, "GET", `/v1/files/${registered.body.id}`)
        assert.strictEqual(record.status, 200, record.text)
        const { download_expires_at, download_url, ...rest } = record.body
        assert.deepStrictEqual(rest, registered.body)
        assert.isAbove(new Date(download_expires_at).getTime(), Date.now())
        const download = yield* fetchUrl(download_url)
        assert.strictEqual(download.status, 200, download.text)
        assert.strictEqual(download.text, "hello, files\n")
        assert.strictEqual(download.headers.get("content-type"), "text/plain")
        assert.include(download.headers.get("content-disposition")!, "attachment")
        assert.include(download.headers.get("content-disposition")!, "hello.txt")
        assert.strictEqual(download.headers.get("x-content-type-options"), "nosniff")
      }))

    it.effect("a login token uploads too (its files have no end user)", () =>
      Effect.gen(function*() {
        const account = yield* newAccount
        const file = yield* upload(account.asLogin, new Uint8Array([1, 2, 3]), { filename: "three.bin" })
        assert.strictEqual(file.size, 3)
        const record = yield* call(account.asLogin, "GET", `/v1/files/${file.id}`)
        assert.strictEqual(record.status, 200, record.text)
      }))

    it.effect("a 50 MiB upload streams to storage although the API takes no body over 1 MiB", () =>
      Effect.gen(function*() {
        const account = yield* newAccount
        const alice = account.asEndUser("alice")
        // The control: the API itself refuses a body over MAX_BODY_BYTES (1 MiB).
        const tooBig = yield* call(alice, "POST", "/v1/files", { upload_id: "x".repeat(2 * MiB) })
        assertError(tooBig, 413, "payload_too_large")

        const size = 50 * MiB
        const ticket = yield* call(alice, "POST", "/v1/files/upload-url", {
          filename: "big.bin",
          content_type: "application/octet-stream",
          size
        })
        assert.strictEqual(ticket.status, 200, ticket.text)

        // Generated as it is sent, hashed on the way: the test never holds the 50 MiB either.
        const expected = Crypto.createHash("sha256")
        const chunk = 256 * 1024
        let sent = 0
        const body = new ReadableStream<Uint8Array>({
          pull(controller) {
            if (sent >= size) return controller.close()
            const piece = Crypto.randomBytes(Math.min(chunk, size - sent))
            expected.update(piece)
            sent += piece.length
            controller.enqueue(piece)
          }
        })
        // No Content-Length: a chunked body, the kind the API's limit would buffer and cut at 1 MiB.
        const put = yield* fetchUrl(ticket.body.upload_url, {
          method: "PUT",
          headers: ticket.body.headers,
          body,
          duplex: "half"
        })
        assert.strictEqual(put.status, 200, put.text)
        const digest = expected.digest("hex")
        assert.deepStrictEqual(put.body, { size, sha256: digest })

        const registered = yield* call(alice, "POST", "/v1/files", { upload_id: ticket.body.upload_id })
        assert.strictEqual(registered.status, 201, registered.text)
        assert.strictEqual(registered.body.size, size)
        assert.strictEqual(registered.body.sha256, digest)

        // And back, hashed as it streams.
        const record = yield* call(alice, "GET", `/v1/files/${registered.body.id}`)
        const back = yield* Effect.promise(async () => {
          const response = await fetch(record.body.download_url)
          const hash = Crypto.createHash("sha256")
          let length = 0
          for await (const piece of response.body as unknown as AsyncIterable<Uint8Array>) {
            hash.update(piece)
            length += piece.length
          }
          return { status: response.status, length, digest: hash.digest("hex") }
        })
        assert.deepStrictEqual(back, { status: 200, length: size, digest })
      }), 120_000)

    it.effect("a declared Content-Length over the API limit is fine on the storage route", () =>
      Effect.gen(function*() {
        const account = yield* newAccount
        const bytes = Crypto.randomBytes(3 * MiB)
        const file = yield* upload(account.asEndUser("bob"), bytes)
        assert.strictEqual(file.size, bytes.length)
        assert.strictEqual(file.sha256, sha256(bytes))
      }))

    it.effect("registering before the bytes arrived is 409 upload_incomplete; after the PUT it works", () =>
      Effect.gen(function*() {
        const account = yield* newAccount
        const alice = account.asEndUser("alice")
        const bytes = new TextEncoder().encode("late bytes")
        const ticket = yield* call(alice, "POST", "/v1/files/upload-url", {
          filename: "late.txt",
          content_type: "text/plain",
          size: bytes.length
        })
        const early = yield* call(alice, "POST", "/v1/files", { upload_id: ticket.body.upload_id })
        assertError(early, 409, "upload_incomplete")

        // Too few bytes are not "there" either: nothing is kept.
        const short = yield* fetchUrl(ticket.body.upload_url, {
          method: "PUT",
          headers: ticket.body.headers,
          body: new ReadableStream({
            start(controller) {
              controller.enqueue(bytes.slice(0, 4))
              controller.close()
            }
          }),
          duplex: "half"
        })
        assertError(short, 400, "invalid_request")
        assertError(yield* call(alice, "POST", "/v1/files", { upload_id: ticket.body.upload_id }), 409, "upload_incomplete")

        // A Content-Length other than the announced size is refused before a byte is read.
        const wrongLength = yield* fetchUrl(ticket.body.upload_url, {
          method: "PUT",
          headers: ticket.body.headers,
          body: new TextEncoder().encode("late bytes, and more")
        })
        assertError(wrongLength, 400, "invalid_request")
        assert.include(wrongLength.body.error.message, "Content-Length")

        const put = yield* fetchUrl(ticket.body.upload_url, { method: "PUT", headers: ticket.body.headers, body: bytes })
        assert.strictEqual(put.status, 200, put.text)
        // The same bytes again (a retry after a lost answer) succeed; other bytes of the same size do not.
        const retry = yield* fetchUrl(ticket.body.upload_url, { method: "PUT", headers: ticket.body.headers, body: bytes })
        assert.strictEqual(retry.status, 200, retry.text)
        const other = yield* fetchUrl(ticket.body.upload_url, {
          method: "PUT",
          headers: ticket.body.headers,
          body: new TextEncoder().encode("LATE BYTES")
        })
        assertError(other, 409, "conflict")

        const registered = yield* call(alice, "POST", "/v1/files", { upload_id: ticket.body.upload_id })
        assert.strictEqual(registered.status, 201, registered.text)
        assert.strictEqual(registered.body.sha256, sha256(bytes))
      }))

    it.effect("more bytes than announced are refused and not kept", () =>
      Effect.gen(function*() {
        const account = yield* newAccount
        const alice = account.asEndUser("alice")
        const ticket = yield* call(alice, "POST", "/v1/files/upload-url", {
          filename: "small.bin",
          content_type: "application/octet-stream",
          size: 1024
        })
        const before = yield* storedObjects
        // Chunked, so only counting can tell: the route stops at the announced size and answers 413. The sender sends
        // 1 KiB more than announced and then waits for the answer without ending the body: the route has read every
        // byte that was sent, so its close after the answer is a clean one (a close with unread bytes would be a
        // reset, which can discard the answer before the sender reads it).
        const outcome = yield* Effect.promise(() =>
          new Promise<{ status: number; text: string }>((resolve, reject) => {
            const url = new URL(ticket.body.upload_url)
            const req = Http.request(url, { method: "PUT", headers: { ...ticket.body.headers, "transfer-encoding": "chunked" } })
            req.on("response", (response) => {
              let text = ""
              response.setEncoding("utf8")
              response.on("data", (chunk) => (text += chunk))
              response.on("end", () => {
                resolve({ status: response.statusCode ?? 0, text })
                req.destroy()
              })
            })
            req.on("error", reject)
            req.write(new Uint8Array(1024))
            req.write(new Uint8Array(1024))
          })
        )
        assert.strictEqual(outcome.status, 413, outcome.text)
        assert.strictEqual(JSON.parse(outcome.text).error.type, "payload_too_large")
        assertError(yield* call(alice, "POST", "/v1/files", { upload_id: ticket.body.upload_id }), 409, "upload_incomplete")
        assert.deepStrictEqual(yield* storedObjects, before)
      }))

    it.effect("the storage route refuses forged signatures with 403 forbidden", () =>
      Effect.gen(function*() {
        const account = yield* newAccount
        const alice = account.asEndUser("alice")
        const bytes = new TextEncoder().encode("guarded")
        const ticket = yield* call(alice, "POST", "/v1/files/upload-url", {
          filename: "guarded.txt",
          content_type: "text/plain",
          size: bytes.length
        })
        const url: string = ticket.body.upload_url
        const signature = new URL(url).searchParams.get("signature")!
        const flipped = (signature[0] === "A" ? "B" : "A") + signature.slice(1)
        const otherKey = url.replace(/obj_[A-Za-z0-9]{32}/, `obj_${"a".repeat(32)}`)
        const forgeries = {
          "a changed signature": withParam(url, "signature", flipped),
          "no signature": (() => {
            const u = new URL(url)
            u.searchParams.delete("signature")
            return u.toString()
          })(),
          "a larger size": withParam(url, "size", String(bytes.length * 1000)),
          "a later expiry": withParam(url, "expires", String(Math.floor(Date.now() / 1000) + 86_400 * 365)),
          "another key": otherKey,
          "a path that is no key": url.replace(/obj_[A-Za-z0-9]{32}/, "..%2F..%2Fetc%2Fpasswd")
        }
        for (const [what, forged] of Object.entries(forgeries)) {
          const reply = yield* fetchUrl(forged, { method: "PUT", headers: ticket.body.headers, body: bytes })
          assert.strictEqual(reply.status, 403, `${what}: ${reply.text}`)
          assert.strictEqual(reply.body.error.type, "forbidden", what)
        }
        // A PUT URL does not download, and a download URL does not upload.
        const asGet = yield* fetchUrl(url)
        assertError(asGet, 403, "forbidden")
        assertError(yield* call(alice, "POST", "/v1/files", { upload_id: ticket.body.upload_id }), 409, "upload_incomplete")

        const put = yield* fetchUrl(url, { method: "PUT", headers: ticket.body.headers, body: bytes })
        assert.strictEqual(put.status, 200, put.text)
        const registered = yield* call(alice, "POST", "/v1/files", { upload_id: ticket.body.upload_id })
        const record = yield* call(alice, "GET", `/v1/files/${registered.body.id}`)
        const download: string = record.body.download_url
        assertError(yield* fetchUrl(download, { method: "PUT", body: bytes }), 403, "forbidden")
        assertError(yield* fetchUrl(withParam(download, "filename", "evil.html")), 403, "forbidden")
        assertError(yield* fetchUrl(withParam(download, "content_type", "text/html")), 403, "forbidden")
        const fine = yield* fetchUrl(download)
        assert.strictEqual(fine.status, 200, fine.text)
      }))

    // An id of another kind is an unknown id (docs/architecture.md, "Ids"): the path lets it through unchecked, and
    // the repository's statement must take it and find nothing (its request once checked the prefix: a 500).
    it.effect("an id of another kind in a path or an environment's files answers 404, as an unknown one does", () =>
      Effect.gen(function*() {
        const caller = (yield* newAccount).asEndUser("alice")
        assertError(yield* call(caller, "GET", "/v1/files/run_0000000000000000000x"), 404, "not_found")
        assertError(yield* call(caller, "GET", "/v1/files/run_0000000000000000000x/content"), 404, "not_found")
        assertError(yield* call(caller, "DELETE", "/v1/files/run_0000000000000000000x"), 404, "not_found")
        assertError(yield* call(caller, "GET", "/v1/environments/file_000000000000000000x"), 404, "not_found")
      }))

    it.effect("files never cross end users or accounts: 404 on GET, DELETE and registration", () =>
      Effect.gen(function*() {
        const account = yield* newAccount
        const alice = account.asEndUser("alice")
        const bob = account.asEndUser("bob")
        const stranger = (yield* newAccount).asEndUser("alice")
        const file = yield* upload(alice, new TextEncoder().encode("alice's"), { filename: "alice.txt" })

        for (const [who, caller] of [["another end user", bob], ["another account", stranger], ["the account without an end user", account.asLogin]] as const) {
          assertError(yield* call(caller, "GET", `/v1/files/${file.id}`), 404, "not_found")
          assertError(yield* call(caller, "DELETE", `/v1/files/${file.id}`), 404, "not_found")
          void who
        }
        // Still there for its owner.
        const mine = yield* call(alice, "GET", `/v1/files/${file.id}`)
        assert.strictEqual(mine.status, 200, mine.text)

        // Nor can another end user register an upload that is not theirs.
        const bytes = new TextEncoder().encode("pending")
        const ticket = yield* call(alice, "POST", "/v1/files/upload-url", {
          filename: "p.txt",
          content_type: "text/plain",
          size: bytes.length
        })
        yield* fetchUrl(ticket.body.upload_url, { method: "PUT", headers: ticket.body.headers, body: bytes })
        assertError(yield* call(bob, "POST", "/v1/files", { upload_id: ticket.body.upload_id }), 404, "not_found")
        assertError(yield* call(stranger, "POST", "/v1/files", { upload_id: ticket.body.upload_id }), 404, "not_found")
        const registered = yield* call(alice, "POST", "/v1/files", { upload_id: ticket.body.upload_id })
        assert.strictEqual(registered.status, 201, registered.text)
      }))

    it.effect("an API key without X-End-User-Id is refused on /v1/files*", () =>
      Effect.gen(function*() {
        const account = yield* newAccount
        const reply = yield* request("POST", "/v1/files/upload-url", {
          token: account.key,
          body: { filename: "a.txt", content_type: "text/plain", size: 1 }
        })
        assertError(reply, 400, "invalid_request")
        assert.match(reply.body.error.message, /^Missing required header: X-End-User-Id/)
      }))

    it.effect("DELETE removes the record and the bytes: the download URL then answers 404", () =>
      Effect.gen(function*() {
        const account = yield* newAccount
        const alice = account.asEndUser("alice")
        const file = yield* upload(alice, new TextEncoder().encode("short-lived"))
        const record = yield* call(alice, "GET", `/v1/files/${file.id}`)
        const key = new URL(record.body.download_url).pathname.split("/").pop()!
        assert.include(yield* storedObjects, key)
        assert.strictEqual((yield* fetchUrl(record.body.download_url)).status, 200)

        const deleted = yield* call(alice, "DELETE", `/v1/files/${file.id}`)
        assert.strictEqual(deleted.status, 200, deleted.text)
        assert.deepStrictEqual(deleted.body, { id: file.id, deleted: true })

        assertError(yield* fetchUrl(record.body.download_url), 404, "not_found")
        assert.notInclude(yield* storedObjects, key)
        assertError(yield* call(alice, "GET", `/v1/files/${file.id}`), 404, "not_found")
        assertError(yield* call(alice, "DELETE", `/v1/files/${file.id}`), 404, "not_found")
      }))

    it.effect("bad requests are 400 invalid_request naming the field", () =>
      Effect.gen(function*() {
        const alice = (yield* newAccount).asEndUser("alice")
        const valid = { filename: "a.txt", content_type: "text/plain", size: 10 }
        const cases: Array<[string, unknown]> = [
          ["filename", { content_type: "text/plain", size: 10 }],
          ["filename", { ...valid, filename: "" }],
          ["filename", { ...valid, filename: "../etc/passwd" }],
          ["filename", { ...valid, filename: "x".repeat(256) }],
          ["content_type", { ...valid, content_type: "not a type" }],
          ["content_type", { ...valid, content_type: "text/plain\r\nx-evil: 1" }],
          ["content_type", { filename: "a.txt", size: 10 }],
          ["size", { ...valid, size: -1 }],
          ["size", { ...valid, size: 1.5 }],
          ["size", { ...valid, size: "10" }],
          ["size", { ...valid, size: 100 * MiB + 1 }]
        ]
        for (const [field, body] of cases) {
          const reply = yield* call(alice, "POST", "/v1/files/upload-url", body)
          assertError(reply, 400, "invalid_request")
          assert.include(reply.body.error.message, field, JSON.stringify(body).slice(0, 100))
        }
        const noId = yield* call(alice, "POST", "/v1/files", {})
        assertError(noId, 400, "invalid_request")
        assert.include(noId.body.error.message, "upload_id")
        assertError(yield* call(alice, "POST", "/v1/files", { upload_id: "upl_nope" }), 404, "not_found")
      }))
  })
})

describe("files: expiry", () => {
  // Download URLs live 3 s and upload URLs 2 s, in whole seconds: a URL made late in a second has a fraction of its
  // first second left, and the upload's PUT must still be in time on a loaded machine (1 s was not, at load 10). The
  // wait outlasts both.
  layer(serverWith({ FILE_UPLOAD_TTL: "2 seconds", FILE_DOWNLOAD_TTL: "3 seconds" }), LIVE)((it) => {
    it.effect("an expired upload or download URL is 403 forbidden", () =>
      Effect.gen(function*() {
        const alice = (yield* newAccount).asEndUser("alice")
        const bytes = new TextEncoder().encode("in time")
        const file = yield* upload(alice, bytes)
        const record = yield* call(alice, "GET", `/v1/files/${file.id}`)
        const late = yield* call(alice, "POST", "/v1/files/upload-url", {
          filename: "late.txt",
          content_type: "text/plain",
          size: bytes.length
        })
        // Polled: the URLs' expiry is wall-clock time, signed into them and checked by the server. A GET changes
        // nothing, so the download URL is read until it is refused; a PUT would store the file, so the upload URL is
        // tried once the `expires_at` it was given has passed (a second before the download's, most times).
        assertError(yield* pollUntil(fetchUrl(record.body.download_url), (reply) => reply.status !== 200, "the download URL expired", { within: 10_000 }), 403, "forbidden")
        yield* pollUntil(Effect.sync(() => Date.now()), (now) => now > Date.parse(late.body.expires_at), "the upload URL's expires_at passed", { every: 50, within: 10_000 })
        const put = yield* fetchUrl(late.body.upload_url, { method: "PUT", headers: late.body.headers, body: bytes })
        assertError(put, 403, "forbidden")
        assert.include(put.body.error.message, "expired")
        // The pending upload is gone with its URL.
        assertError(yield* call(alice, "POST", "/v1/files", { upload_id: late.body.upload_id }), 404, "not_found")
        // The file itself is not: a fresh download URL works.
        const fresh = yield* call(alice, "GET", `/v1/files/${file.id}`)
        assert.strictEqual((yield* fetchUrl(fresh.body.download_url)).text, "in time")
      }))
  })
})
