import { Schema } from "effect"

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

export const UserId = Schema.String.pipe(Schema.startsWith("usr_"), Schema.brand("UserId"))
export type UserId = typeof UserId.Type
export const newUserId = () => UserId.make(newId("usr"))

export const ApiKeyId = Schema.String.pipe(Schema.startsWith("key_"), Schema.brand("ApiKeyId"))
export type ApiKeyId = typeof ApiKeyId.Type
export const newApiKeyId = () => ApiKeyId.make(newId("key"))

/**
 * An OAuth app's id (`app_…`, DESIGN.md §6). The brand is a compile-time name only: the wire carries the same string, and a
 * path or body that names a wrong id still answers "not found", as before.
 */
export const AppId = Schema.String.pipe(Schema.brand("AppId"))
export type AppId = typeof AppId.Type
export const newAppId = (): AppId => AppId.make(newId("app"))

/**
 * An environment's id (`env_…`, DESIGN.md §6). Here, not in the environments domain, because files name it too (a file
 * an environment lists cannot be deleted) and environments name files: the id of each is a platform word, so neither
 * folder imports the other's. The brand is a compile-time name only, as for the others.
 */
export const EnvironmentId = Schema.String.pipe(Schema.brand("EnvironmentId"))
export type EnvironmentId = typeof EnvironmentId.Type
export const newEnvironmentId = (): EnvironmentId => EnvironmentId.make(newId("env"))

/** A webhook endpoint's id (`whk_…`): the brand is a compile-time name only, as for the others. */
export const WebhookId = Schema.String.pipe(Schema.brand("WebhookId"))
export type WebhookId = typeof WebhookId.Type
export const newWebhookId = (): WebhookId => WebhookId.make(newId("whk"))

/** One event's delivery to one endpoint (`whd_…`). */
export const WebhookDeliveryId = Schema.String.pipe(Schema.brand("WebhookDeliveryId"))
export type WebhookDeliveryId = typeof WebhookDeliveryId.Type
export const newWebhookDeliveryId = (): WebhookDeliveryId => WebhookDeliveryId.make(newId("whd"))

/** A webhook event (`evt_…`): also the `webhook-id` of every delivery of it, retries and redeliveries alike. */
export const WebhookEventId = Schema.String.pipe(Schema.brand("WebhookEventId"))
export type WebhookEventId = typeof WebhookEventId.Type
export const newWebhookEventId = (): WebhookEventId => WebhookEventId.make(newId("evt"))
