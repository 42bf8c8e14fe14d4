import { Context, Duration, Effect, Layer } from "effect"
import * as Dns from "node:dns"
import * as Http from "node:http"
import * as Https from "node:https"
import { isIP, type LookupFunction } from "node:net"
import { performance } from "node:perf_hooks"
import { ToolsConfig } from "../runtime/tools/Config.js"
import { isPrivateAddress, makeHostAddresses, OutboundRefused } from "../runtime/tools/Outbound.js"
import { WebhooksConfig } from "./Config.js"

/** One signed POST to an endpoint. */
export interface Attempt {
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

/** What came of it: a 2xx is the only success; `status` is null when no answer came (timeout, refused, ...). */
export interface AttemptResult {
  readonly ok: boolean
  readonly status: number | null
  readonly latencyMs: number
  /** The answer's first bytes (at most `RESPONSE_BYTES`), as text. */
  readonly body: string | null
  readonly error: string | null
}

/** How much of an answer the delivery log keeps: enough to see an error page's message, not a download. */
export const RESPONSE_BYTES = 1024

/** The port that sends an attempt (a test sends through a fake). It never fails: a failed attempt is a result. */
export class WebhookSender extends Context.Tag("atrium/webhooks/WebhookSender")<WebhookSender, {
  readonly send: (attempt: Attempt) => Effect.Effect<AttemptResult>
}>() {}

/** Text the database can hold (no NUL) from an answer's first bytes. */
const storable = (bytes: Buffer) => bytes.subarray(0, RESPONSE_BYTES).toString("utf8").replace(/\u0000/g, "\uFFFD")

/**
 * A DNS lookup that refuses special-purpose addresses at connection time: the addresses checked are the ones the
 * socket connects to, so a name that resolved to a public address when the URL was checked and to a private one now
 * (DNS rebinding) is refused here.
 */
const guardedLookup = (allowed: ReadonlySet<string>, own: () => ReadonlySet<string>): LookupFunction =>
(hostname, options, callback) => {
  Dns.lookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) return callback(error, "", 0)
    const list = addresses as Array<Dns.LookupAddress>
    if (!allowed.has(hostname.toLowerCase())) {
      const refused = list.find((entry) => !allowed.has(entry.address) && isPrivateAddress(entry.address, own()))
      if (refused !== undefined) {
        return callback(
          new OutboundRefused(`${hostname} resolves to a private address (${refused.address}); TOOL_ALLOWED_HOSTS can allow it`),
          "",
          0
        )
      }
    }
    // With `all`, Node's lookup callback takes the list; its type is the single address's overload.
    if (options.all) return (callback as unknown as (error: null, addresses: Array<Dns.LookupAddress>) => void)(null, list)
    const first = list[0]
    if (first === undefined) return callback(new Error(`${hostname} has no address`), "", 0)
    return callback(null, first.address, first.family)
  })
}

/**
 * Sends over `node:http(s)`: the outbound rule (docs/tools.md) on the URL and again on the addresses connected to;
 * no redirect is followed (a 3xx is a failed attempt: the endpoint's owner moves the URL); a timeout per attempt;
 * the answer read up to its first `RESPONSE_BYTES`, the rest dropped.
 */
export const WebhookSenderLive = Layer.effect(
  WebhookSender,
  Effect.gen(function*() {
    const { allowedHosts } = yield* ToolsConfig
    const { timeout } = yield* WebhooksConfig
    const own = makeHostAddresses()
    const timeoutMs = Duration.toMillis(timeout)
    const lookup = guardedLookup(allowedHosts, own)

    /**
     * What is refused before connecting: another scheme, or an address written in the URL that is special-purpose
     * (a name is judged by `lookup`, on the addresses it resolves to as the socket connects).
     */
    const literalRefusal = (url: URL): string | undefined => {
      if (url.protocol !== "http:" && url.protocol !== "https:") return `${url.protocol} URLs are not allowed`
      const host = url.hostname.replace(/^\[|\]$/g, "").toLowerCase()
      if (isIP(host) === 0 || allowedHosts.has(host) || !isPrivateAddress(host, own())) return undefined
      return `${url.hostname} is a private address; TOOL_ALLOWED_HOSTS can allow it`
    }

    const send = (attempt: Attempt) =>
      Effect.async<AttemptResult>((resume) => {
        const started = performance.now()
        const elapsed = () => Math.round(performance.now() - started)
        let request: Http.ClientRequest | undefined
        let settled = false
        const finish = (result: Omit<AttemptResult, "latencyMs">) => {
          if (settled) return
          settled = true
          clearTimeout(timer)
          request?.destroy()
          resume(Effect.succeed({ ...result, latencyMs: elapsed() }))
        }
        const failed = (error: string) => finish({ ok: false, status: null, body: null, error })
        const timer = setTimeout(() => failed(`timed out after ${Duration.format(timeout)}`), timeoutMs)
        const url = new URL(attempt.url)
        const refusal = literalRefusal(url)
        if (refusal !== undefined) {
          failed(refusal)
          return Effect.void
        }
        const client = url.protocol === "https:" ? Https : Http
        request = client.request(url, { method: "POST", headers: attempt.headers, lookup, agent: false }, (response) => {
          const status = response.statusCode ?? 0
          const chunks: Array<Buffer> = []
          let size = 0
          const done = () => {
            const ok = status >= 200 && status < 300
            finish({
              ok,
              status,
              body: storable(Buffer.concat(chunks)),
              error: ok ? null : status >= 300 && status < 400 ? `redirect (${status}) not followed` : `answered ${status}`
            })
          }
          response.on("data", (chunk: Buffer) => {
            if (size < RESPONSE_BYTES) chunks.push(chunk)
            size += chunk.length
            if (size >= RESPONSE_BYTES) done()
          })
          response.on("end", done)
          response.on("error", done)
        })
        request.on("error", (error) => failed(error.message))
        request.end(attempt.body)
        return Effect.sync(() => {
          settled = true
          clearTimeout(timer)
          request?.destroy()
        })
      })

    return { send: (attempt: Attempt) => send(attempt).pipe(Effect.withSpan("WebhookSender.send")) }
  })
).pipe(Layer.provide([ToolsConfig.Default, WebhooksConfig.Default]))
