import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Exit, Option, Schema } from "effect"
import * as Crypto from "node:crypto"
import { IdempotencyConflict, InvalidRequest } from "../Errors.js"
import { wireErrorResponse } from "./ErrorResponse.js"
import type { KeyValueStore } from "../KeyValue.js"
import { IDEMPOTENCY_KEY } from "./Headers.js"

/**
 * `Idempotency-Key` on the POSTs that create something (docs/http.md): the same key with the same request answers
 * the stored first response instead of creating a second thing; the same key with another request is a 409.
 *
 * Every POST of the contract that creates something is here (whatever its status: OpenAI's vector stores answer
 * 200), but `POST /api/apps` and `POST /api/user/apiKey/create`, whose answers hold a secret shown once: a replay
 * would show it again, which the platform never does. `test/security/edge.test.ts` walks the contract's POSTs and
 * replays each create; a POST that is not a create is named there with its reason.
 */
export const IDEMPOTENT_CREATES: ReadonlyArray<string> = [
  "/v1/agents",
  "/v1/sessions",
  "/v1/files",
  "/v1/vector_stores",
  "/v1/vector_stores/:id/files",
  "/v1/environments",
  "/v1/credentials",
  "/v1/distillations",
  "/api/payment/orders",
  "/api/apps/:id/meters",
  "/api/creator/apply",
  "/v1/schedules",
  "/v1/sessions/:id/fork",
  "/v1/evals/datasets",
  "/v1/evals/datasets/:id/rows",
  "/v1/evals/datasets/:id/import",
  "/v1/evals/runs"
]

const CREATE_PATTERNS = IDEMPOTENT_CREATES.map((path) => new RegExp(`^${path.replace(/:[a-z]+/g, "[^/]+")}/?$`))

/** How long a key answers with its first response; a key reused after that starts afresh. */
const KEPT = "24 hours"
/**
 * A request that dies without answering (a crash) frees its key after this; longer than any create runs (a
 * distillation waits up to DISTILLATION_TIMEOUT, 2 minutes by default), so a slow create is never made twice.
 */
const CLAIMED = "10 minutes"

const StoredResponse = Schema.Struct({
  state: Schema.Literal("done"),
  fingerprint: Schema.String,
  status: Schema.Number,
  contentType: Schema.String,
  headers: Schema.Record({ key: Schema.String, value: Schema.String }),
  body: Schema.String
})
const IdempotencyRecord = Schema.Union(Schema.Struct({ state: Schema.Literal("claimed"), fingerprint: Schema.String }), StoredResponse)
const decodeRecord = Schema.decodeUnknownOption(Schema.parseJson(IdempotencyRecord))

const sha256 = (text: string) => Crypto.createHash("sha256").update(text).digest("base64url")

/** Headers of a stored answer that describe the thing made (not this exchange's own, like the request id). */
const KEPT_HEADERS = ["location"]

/**
 * Runs `create` at most once per key. Keys belong to the account (`accountOf`: whoever the credential speaks for)
 * and, within it, to the end user (`X-End-User-Id`), whose sessions and files are apart too: another account's or
 * end user's key never meets this one's stored answer. A request that names no account is left to its route (a
 * 401, or a public create).
 */
export const idempotent = <E, R, R2>(
  store: KeyValueStore,
  request: HttpServerRequest.HttpServerRequest,
  accountOf: Effect.Effect<Option.Option<string>, never, R2>,
  create: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>,
  /** What the request asks, when the edge read its body already (a multipart upload: its parts, not its boundary). */
  asked?: string
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | R2> => {
  const key = request.headers["idempotency-key"]
  // Most requests carry no key: they run as they are, without a step of their own.
  if (request.method !== "POST" || key === undefined) return create
  const path = request.url.split("?")[0]!
  if (!CREATE_PATTERNS.some((pattern) => pattern.test(path))) return create
  return Effect.gen(function*() {
    if (!IDEMPOTENCY_KEY.test(key)) {
      return yield* wireErrorResponse(new InvalidRequest({ message: "Invalid request: Idempotency-Key: 1-255 visible ASCII characters." }))
    }
    const account = yield* accountOf
    if (Option.isNone(account)) return yield* create
    const storeKey = `idem:${sha256(`${account.value}\n${request.headers["x-end-user-id"] ?? ""}`)}:${sha256(key)}`
    const body = asked ?? (yield* Effect.orElseSucceed(request.text, () => ""))
    const fingerprint = sha256(`${request.method} ${path}\n${body}`)

    const claimed = yield* store.setIfAbsent(storeKey, JSON.stringify({ state: "claimed", fingerprint }), CLAIMED)
    if (!claimed) {
      const record = Option.flatMap(yield* store.get(storeKey), decodeRecord)
      if (Option.isSome(record) && record.value.fingerprint !== fingerprint) {
        return yield* wireErrorResponse(new IdempotencyConflict({ message: "This Idempotency-Key was sent with a different request.", final: true }))
      }
      // Claimed and not answered yet (or gone between the claim and this read): the first request is still at it.
      if (Option.isNone(record) || record.value.state === "claimed") {
        return yield* wireErrorResponse(new IdempotencyConflict({ message: "A request with this Idempotency-Key is being answered; retry shortly." }))
      }
      const stored = record.value
      return HttpServerResponse.uint8Array(Buffer.from(stored.body, "base64"), {
        status: stored.status,
        contentType: stored.contentType,
        headers: { ...stored.headers, "idempotent-replayed": "true" }
      })
    }

    return yield* create.pipe(
      Effect.onExit((exit) => {
        const response = Exit.isSuccess(exit) ? exit.value : undefined
        // Only a thing made is remembered: a refusal or a failure leaves the key free for a corrected retry.
        if (response === undefined || response.status < 200 || response.status >= 300 || response.body._tag !== "Uint8Array") {
          return store.delete(storeKey)
        }
        const headers = Object.fromEntries(KEPT_HEADERS.flatMap((name) => {
          const value = response.headers[name]
          return value === undefined ? [] : [[name, value]]
        }))
        const answer: typeof StoredResponse.Type = {
          state: "done",
          fingerprint,
          status: response.status,
          contentType: response.body.contentType,
          headers,
          body: Buffer.from(response.body.body).toString("base64")
        }
        return store.set(storeKey, JSON.stringify(answer), KEPT)
      })
    )
  })
}
