import { ParseResult, Schema } from "effect"

/** Ids are prefixed strings (DESIGN.md §6); the prefix says what a bare id in a log line is. */

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/**
 * Random bytes from the system CSPRNG, drawn 4 KiB at a time and each used once, as Node's own `randomUUID` does: a
 * call to the CSPRNG per id cost a `randomFillSync` each, five per run (a run's id, its model's part ids, its spans).
 * Web Crypto's `getRandomValues` (a global in Node and browsers alike) keeps this module free of `node:*`: it is a
 * contract.
 */
const POOL = new Uint8Array(4096)
let taken = POOL.length
const randomByte = (): number => {
  if (taken === POOL.length) {
    globalThis.crypto.getRandomValues(POOL)
    taken = 0
  }
  return POOL[taken++]!
}

/** Uniform base62 (rejection sampling, so no character is likelier than another). */
export const randomBase62 = (length: number): string => {
  let out = ""
  while (out.length < length) {
    const byte = randomByte()
    if (byte < 248) out += BASE62[byte % 62]
  }
  return out
}

/** `bytes` random bytes as lowercase hex (a span's id). */
export const randomHex = (bytes: number): string => {
  let out = ""
  for (let i = 0; i < bytes; i++) out += randomByte().toString(16).padStart(2, "0")
  return out
}

export const newId = (prefix: string) => `${prefix}_${randomBase62(20)}`

/**
 * One maker for every kind of id (issue 49): `prefixedId("file", "FileId")` is the schema of a `file_…` id, branded
 * so a signature names the kind it takes and the compiler refuses a run's id where a file's is wanted.
 *
 * - The schema checks the prefix: a body or a row that names an id of the wrong kind fails to decode (a 400 at the
 *   edge, where the contract uses it).
 * - `.unchecked` is the same brand without the prefix check, for a path segment and for the bodies that answered
 *   "not found" before: an id of the wrong kind there answers 404 `not_found` like an unknown one, as OpenAI does and
 *   as the docs promise. The type is the same, so a handler hands either to a service.
 * - `.make` checks the prefix (a wrong one throws), for an id built from a known string.
 * - `.random()` mints one with `newId` and does not decode it: minting is on the hot path (five ids per run).
 */
export const prefixedId = <const Prefix extends string, const Name extends string>(prefix: Prefix, name: Name) => {
  const unchecked = Schema.String.pipe(Schema.brand(name))
  type Id = typeof unchecked.Type
  const start = `${prefix}_`
  /**
   * The prefix is checked when an id is decoded (a body, a row), not when one is encoded: a repository's request is
   * encoded, and an id of the wrong kind that a path let through (`.unchecked`) must find nothing there (404), not
   * fail the statement (a 500).
   */
  const checked = Schema.transformOrFail(Schema.String, unchecked, {
    strict: true,
    decode: (id, _, ast) =>
      id.startsWith(start) ? ParseResult.succeed(id) : ParseResult.fail(new ParseResult.Type(ast, id, `Expected ${name}, an id starting with "${start}"`)),
    encode: ParseResult.succeed
  }).annotations({ identifier: name, jsonSchema: { type: "string", pattern: `^${start}` } })
  return Object.assign(checked, {
    prefix,
    unchecked,
    /** An id built from a known string: one of the wrong kind throws. */
    make: (id: string): Id => {
      if (!id.startsWith(start)) throw new Error(`Expected ${name}, an id starting with "${start}": ${id}`)
      return id as Id
    },
    // A cast, not a decode: the prefix is ours, and a decode per id would cost more than the id.
    random: (): Id => newId(prefix) as Id
  })
}

export const UserId = prefixedId("usr", "UserId")
export type UserId = typeof UserId.Type

export const ApiKeyId = prefixedId("key", "ApiKeyId")
export type ApiKeyId = typeof ApiKeyId.Type

/** An OAuth app's id (`app_…`, DESIGN.md §6). */
export const AppId = prefixedId("app", "AppId")
export type AppId = typeof AppId.Type

/**
 * An environment's id (`env_…`, DESIGN.md §6). Here, not in the environments domain, because files name it too (a file
 * an environment lists cannot be deleted) and environments name files: the id of each is a platform word, so neither
 * folder imports the other's.
 */
export const EnvironmentId = prefixedId("env", "EnvironmentId")
export type EnvironmentId = typeof EnvironmentId.Type

/**
 * An eval dataset's id (`eds_…`): a platform word, since an agent's publish gate names one and the evals domain,
 * above agents, owns them.
 */
export const EvalDatasetId = prefixedId("eds", "EvalDatasetId")
export type EvalDatasetId = typeof EvalDatasetId.Type

/** An agent's id (`agt_…`, DESIGN.md §6): a platform word, since the engine (below agents) names the agent it runs. */
export const AgentId = prefixedId("agt", "AgentId")
export type AgentId = typeof AgentId.Type

/** A session's id (`ses_…`, DESIGN.md §6): a platform word, since runs name a turn's session and sessions are above runs. */
export const SessionId = prefixedId("ses", "SessionId")
export type SessionId = typeof SessionId.Type

/** A webhook endpoint's id (`whk_…`). */
export const WebhookId = prefixedId("whk", "WebhookId")
export type WebhookId = typeof WebhookId.Type

/** One event's delivery to one endpoint (`whd_…`). */
export const WebhookDeliveryId = prefixedId("whd", "WebhookDeliveryId")
export type WebhookDeliveryId = typeof WebhookDeliveryId.Type

/** A webhook event (`evt_…`): also the `webhook-id` of every delivery of it, retries and redeliveries alike. */
export const WebhookEventId = prefixedId("evt", "WebhookEventId")
export type WebhookEventId = typeof WebhookEventId.Type
