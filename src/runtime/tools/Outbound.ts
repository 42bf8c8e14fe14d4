import { lookup } from "node:dns/promises"
import { BlockList, isIP } from "node:net"
import { Config, Effect } from "effect"

/**
 * Outbound safety for tool traffic (docs/tools.md): a tool URL whose host resolves to a loopback, private,
 * link-local, shared, multicast or cloud-metadata address is refused unless `TOOL_ALLOWED_HOSTS` names the host (or
 * the address). Redirects are followed by hand, each hop checked the same way, so a public server cannot bounce a
 * call to an internal one.
 */

export const ToolAllowedHosts = Config.map(
  Config.string("TOOL_ALLOWED_HOSTS").pipe(Config.withDefault("")),
  (raw) => new Set(raw.split(",").map((host) => host.trim().toLowerCase()).filter((host) => host.length > 0))
)

const blocked = new BlockList()
for (const [network, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4]
] as const) blocked.addSubnet(network, prefix, "ipv4")
for (const [network, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8],
  ["64:ff9b::", 96]
] as const) blocked.addSubnet(network, prefix, "ipv6")

/** True for an address a tool may not reach without an allowance. */
export const isPrivateAddress = (address: string): boolean => {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
  if (mapped !== null) return isPrivateAddress(mapped[1]!)
  const family = isIP(address)
  if (family === 4) return blocked.check(address, "ipv4")
  if (family === 6) return blocked.check(address, "ipv6")
  return true
}

export class OutboundRefused extends Error {
  readonly _tag = "OutboundRefused"
}

/** Checks one URL: its scheme, and every address its host resolves to. */
export const checkUrl = async (url: URL, allowed: ReadonlySet<string>): Promise<void> => {
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new OutboundRefused(`${url.protocol} URLs are not allowed`)
  const host = url.hostname.replace(/^\[|\]$/g, "").toLowerCase()
  if (allowed.has(host)) return
  const addresses = isIP(host) !== 0 ? [host] : (await lookup(host, { all: true, verbatim: true })).map((entry) => entry.address)
  for (const address of addresses) {
    if (allowed.has(address)) continue
    if (isPrivateAddress(address)) {
      throw new OutboundRefused(`${url.hostname} resolves to a private address (${address}); TOOL_ALLOWED_HOSTS can allow it`)
    }
  }
}

const MAX_REDIRECTS = 5

/**
 * A `fetch` for tool traffic: every URL, the first and each redirect's, is checked before it is requested. A
 * redirect to another origin drops the `Authorization` header (a credential goes only to its server).
 */
export const makeSafeFetch = (allowed: ReadonlySet<string>) =>
async (input: string | URL, init?: RequestInit): Promise<Response> => {
  let url = new URL(String(input))
  const origin = url.origin
  let request: RequestInit = { ...init, redirect: "manual" }
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    await checkUrl(url, allowed)
    const response = await fetch(url, request)
    const location = response.headers.get("location")
    if (response.status < 300 || response.status >= 400 || location === null) return response
    await response.body?.cancel()
    url = new URL(location, url)
    if (url.origin !== origin) {
      const headers = new Headers(request.headers)
      headers.delete("authorization")
      request = { ...request, headers }
    }
    if (response.status === 303) request = { ...request, method: "GET", body: null }
  }
  throw new OutboundRefused(`more than ${MAX_REDIRECTS} redirects`)
}

export const SafeFetch = Effect.map(Effect.orDie(ToolAllowedHosts), makeSafeFetch)
