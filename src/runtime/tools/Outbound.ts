import { lookup } from "node:dns/promises"
import { BlockList, isIP } from "node:net"
import { networkInterfaces } from "node:os"
import { Effect } from "effect"
import { ToolsConfig } from "./Config.js"

/**
 * Outbound safety for tool traffic (docs/tools.md): a tool URL whose host resolves to a special-purpose address
 * (loopback, private, link-local, shared, documentation, multicast, cloud metadata, ... : IANA's registries, whole),
 * an IPv6 spelling of one (mapped, compatible, translated, NAT64, 6to4) or one of this host's own addresses is
 * refused unless `TOOL_ALLOWED_HOSTS` names the host (or the address). Redirects are followed by hand, each hop checked the same way, so a public server cannot bounce a
 * call to an internal one.
 */

/**
 * IANA's IPv4 special-purpose address registry, every entry (the globally reachable anycast ones too: no tool has a
 * reason to call an AS112 sink or a relay), plus multicast. 255.255.255.255 is inside 240.0.0.0/4.
 */
const SPECIAL_V4: ReadonlyArray<readonly [string, number]> = [
  ["0.0.0.0", 8], // "this network"
  ["10.0.0.0", 8], // private
  ["100.64.0.0", 10], // shared address space (carrier-grade NAT)
  ["127.0.0.0", 8], // loopback
  ["169.254.0.0", 16], // link-local, cloud metadata
  ["172.16.0.0", 12], // private
  ["192.0.0.0", 24], // IETF protocol assignments
  ["192.0.2.0", 24], // TEST-NET-1 (documentation; some hosts number their own interfaces from it)
  ["192.31.196.0", 24], // AS112-v4
  ["192.52.193.0", 24], // AMT
  ["192.88.99.0", 24], // deprecated 6to4 relay anycast
  ["192.168.0.0", 16], // private
  ["192.175.48.0", 24], // direct delegation AS112
  ["198.18.0.0", 15], // benchmarking
  ["198.51.100.0", 24], // TEST-NET-2
  ["203.0.113.0", 24], // TEST-NET-3
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4] // reserved, limited broadcast
]

/**
 * IANA's IPv6 special-purpose registry, except the prefixes that carry an IPv4 address (below), plus multicast and
 * the deprecated site-local range.
 */
const SPECIAL_V6: ReadonlyArray<readonly [string, number]> = [
  ["::", 128], // unspecified
  ["::1", 128], // loopback
  ["64:ff9b:1::", 48], // local-use IPv4/IPv6 translation (RFC 8215): a private network's NAT64
  ["100::", 64], // discard-only
  ["100:0:0:1::", 64], // dummy prefix
  ["2001::", 23], // IETF protocol assignments: Teredo (2001::/32), benchmarking, AMT, ORCHID, ...
  ["2001:db8::", 32], // documentation
  ["2620:4f:8000::", 48], // direct delegation AS112
  ["3fff::", 20], // documentation
  ["5f00::", 16], // segment routing SIDs
  ["fc00::", 7], // unique local
  ["fe80::", 10], // link-local
  ["fec0::", 10], // site-local (deprecated)
  ["ff00::", 8] // multicast
]

const blockedV4 = new BlockList()
for (const [network, prefix] of SPECIAL_V4) blockedV4.addSubnet(network, prefix, "ipv4")
const blockedV6 = new BlockList()
for (const [network, prefix] of SPECIAL_V6) blockedV6.addSubnet(network, prefix, "ipv6")

/** The eight 16-bit groups of an IPv6 address (zone dropped, a trailing dotted quad read); undefined if malformed. */
export const ipv6Groups = (address: string): Array<number> | undefined => {
  let text = address.split("%", 1)[0]!.toLowerCase()
  const dotted = /^(.*:)(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text)
  if (dotted !== null) {
    const bytes = dotted.slice(2).map(Number)
    if (bytes.some((byte) => byte > 255)) return undefined
    text = `${dotted[1]}${((bytes[0]! << 8) | bytes[1]!).toString(16)}:${((bytes[2]! << 8) | bytes[3]!).toString(16)}`
  }
  const halves = text.split("::")
  if (halves.length > 2) return undefined
  const head = halves[0] === "" ? [] : halves[0]!.split(":")
  const tail = halves.length === 2 && halves[1] !== "" ? halves[1]!.split(":") : []
  const missing = 8 - head.length - tail.length
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined
  const groups = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill("0"), ...tail]
  if (!groups.every((group) => /^[0-9a-f]{1,4}$/.test(group))) return undefined
  return groups.map((group) => parseInt(group, 16))
}

const quad = (high: number, low: number) => `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`

/**
 * The IPv4 address an IPv6 address stands for, in every form that carries one: IPv4-mapped (`::ffff:a.b.c.d`),
 * IPv4-compatible (`::a.b.c.d`, deprecated, `::7f00:1`), SIIT-translated (`::ffff:0:a.b.c.d`), NAT64's well-known
 * prefix (`64:ff9b::/96`) and 6to4 (`2002:AABB:CCDD::/48`). The connection reaches that IPv4 address (through the
 * host's stack, a translator or a relay), so it is judged as that address.
 */
export const embeddedIpv4 = (groups: ReadonlyArray<number>): string | undefined => {
  const [g0, g1, g2, g3, g4, g5, g6, g7] = groups as [number, number, number, number, number, number, number, number]
  const zeroTo = (n: number) => groups.slice(0, n).every((group) => group === 0)
  if (zeroTo(5) && g5 === 0xffff) return quad(g6, g7) // mapped
  if (zeroTo(4) && g4 === 0xffff && g5 === 0) return quad(g6, g7) // translated
  if (zeroTo(6) && (g6 !== 0 || g7 > 1)) return quad(g6, g7) // compatible (:: and ::1 are themselves)
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) return quad(g6, g7) // NAT64
  if (g0 === 0x2002) return quad(g1, g2) // 6to4
  return undefined
}

/** An address as one spelling: IPv4 as written, IPv6 as its eight groups in hex (what `hostAddresses` holds). */
export const canonicalAddress = (address: string): string => {
  if (isIP(address) !== 6) return address
  const groups = ipv6Groups(address)
  return groups === undefined ? address.toLowerCase() : groups.map((group) => group.toString(16)).join(":")
}

/**
 * True for an address a tool may not reach without an allowance: any special-purpose address (IANA's registries),
 * an IPv6 form of such an IPv4 address, one of `own` (this host's interface addresses), or what is not an address.
 */
export const isPrivateAddress = (address: string, own: ReadonlySet<string> = new Set()): boolean => {
  const family = isIP(address)
  if (family === 0) return true
  if (own.has(canonicalAddress(address))) return true
  if (family === 4) return blockedV4.check(address, "ipv4")
  const groups = ipv6Groups(address)
  if (groups === undefined) return true
  const v4 = embeddedIpv4(groups)
  if (v4 !== undefined) return isPrivateAddress(v4, own)
  return blockedV6.check(groups.map((group) => group.toString(16)).join(":"), "ipv6")
}

/**
 * This host's own interface addresses (`os.networkInterfaces()`): a server listening on 0.0.0.0 answers on every
 * one of them, public ones included, so a tool URL naming one reaches the platform from inside. Read when made and
 * again whenever the last reading is older than `maxAgeMs` (addresses come and go with DHCP, VPNs, containers).
 */
export const makeHostAddresses = (
  read: () => NodeJS.Dict<ReadonlyArray<{ readonly address: string }>> = networkInterfaces,
  maxAgeMs = 10_000,
  now: () => number = Date.now
) => {
  const load = () =>
    new Set(Object.values(read()).flatMap((entries) => (entries ?? []).map((entry) => canonicalAddress(entry.address))))
  let addresses = load()
  let readAt = now()
  return (): ReadonlySet<string> => {
    if (now() - readAt >= maxAgeMs) {
      addresses = load()
      readAt = now()
    }
    return addresses
  }
}

export class OutboundRefused extends Error {
  readonly _tag = "OutboundRefused"
}

/** Checks one URL: its scheme, and every address its host resolves to (against `own`, this host's addresses too). */
export const checkUrl = async (url: URL, allowed: ReadonlySet<string>, own: ReadonlySet<string> = new Set()): Promise<void> => {
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new OutboundRefused(`${url.protocol} URLs are not allowed`)
  const host = url.hostname.replace(/^\[|\]$/g, "").toLowerCase()
  if (allowed.has(host)) return
  const addresses = isIP(host) !== 0 ? [host] : (await lookup(host, { all: true, verbatim: true })).map((entry) => entry.address)
  for (const address of addresses) {
    if (allowed.has(address)) continue
    if (isPrivateAddress(address, own)) {
      throw new OutboundRefused(`${url.hostname} resolves to a private address (${address}); TOOL_ALLOWED_HOSTS can allow it`)
    }
  }
}

const MAX_REDIRECTS = 5

/**
 * A `fetch` for tool traffic: every URL, the first and each redirect's, is checked before it is requested. A
 * redirect to another origin drops the `Authorization` header (a credential goes only to its server).
 */
export const makeSafeFetch = (allowed: ReadonlySet<string>, own: () => ReadonlySet<string> = () => new Set()) =>
async (input: string | URL, init?: RequestInit): Promise<Response> => {
  let url = new URL(String(input))
  const origin = url.origin
  let request: RequestInit = { ...init, redirect: "manual" }
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    await checkUrl(url, allowed, own())
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

/** The safe fetch of a service: this host's addresses are read when it is built, and refreshed as it is used. */
export const SafeFetch = Effect.flatMap(ToolsConfig, ({ allowedHosts }) =>
  Effect.sync(() => makeSafeFetch(allowedHosts, makeHostAddresses())))
