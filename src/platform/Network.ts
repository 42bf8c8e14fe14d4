import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Option } from "effect"
import * as Crypto from "node:crypto"
import * as Net from "node:net"

/**
 * The client's address: the socket's peer, or, when `TRUST_PROXY` is on, the right-most `X-Forwarded-For` entry:
 * the one the proxy in front of us appended for the peer it saw. Everything left of it came with the request and
 * may be forged (`X-Forwarded-For: 10.0.0.1` from the internet must not open `/internal/*`). Without `TRUST_PROXY`
 * the header is ignored: anyone can write it.
 */
export const clientAddress = (request: HttpServerRequest.HttpServerRequest, trustProxy: boolean): string => {
  if (trustProxy) {
    const forwarded = request.headers["x-forwarded-for"]?.split(",").at(-1)?.trim()
    if (forwarded !== undefined && Net.isIP(normalize(forwarded)) !== 0) return normalize(forwarded)
  }
  return Option.match(request.remoteAddress, { onNone: () => "unknown", onSome: normalize })
}

/** `::ffff:10.0.0.1` is an IPv4 peer on a dual-stack socket. */
const normalize = (address: string) => address.startsWith("::ffff:") ? address.slice(7) : address

const privateV4 = new Net.BlockList()
for (const [network, prefix] of [
  ["127.0.0.0", 8],
  ["10.0.0.0", 8],
  ["172.16.0.0", 12],
  ["192.168.0.0", 16],
  ["169.254.0.0", 16],
  ["100.64.0.0", 10]
] as const) privateV4.addSubnet(network, prefix, "ipv4")
const privateV6 = new Net.BlockList()
privateV6.addAddress("::1", "ipv6")
privateV6.addSubnet("fc00::", 7, "ipv6")
privateV6.addSubnet("fe80::", 10, "ipv6")

/** Loopback and private ranges (RFC 1918, RFC 6598, link-local, IPv6 ULA): the network `/internal/*` serves. */
export const isPrivateAddress = (address: string): boolean => {
  switch (Net.isIP(address)) {
    case 4:
      return privateV4.check(address, "ipv4")
    case 6:
      // An IPv4-mapped address (`::ffff:10.0.0.1`, `::ffff:a00:1`) is judged by the IPv4 ranges.
      return privateV6.check(address, "ipv6") || privateV4.check(address, "ipv6")
    default:
      return false
  }
}

/**
 * The path the router matches for a request target, for guards that must see what the router sees. The router
 * (find-my-way-ts under `HttpLayerRouter`) takes the path of an absolute-form target (`GET http://host/x`),
 * collapses duplicate slashes, stops at `?`, `;` or `#`, percent-decodes and ignores case, so a guard reading
 * `request.url` as written is bypassed by `//internal/x`, `/%69nternal/x`, `/INTERNAL/x` or
 * `http://host/internal/x`. This errs towards matching more: it also decodes what the router keeps encoded.
 */
export const routePath = (url: string): string => {
  let path = url.startsWith("/") ? url : url.replace(/^[^:/?#]*:\/\/[^/?#]*/, "")
  path = path.split(/[?;#]/, 1)[0]!
  try {
    path = decodeURIComponent(path)
  } catch {
    // A malformed escape: the router matches nothing either; judge the path as written.
  }
  path = `/${path}`.replace(/\/{2,}/g, "/")
  return path.toLowerCase()
}

/**
 * Whether `presented` is the operator's secret, in time that does not depend on where they differ: both sides are
 * hashed first, so neither their lengths nor a common prefix leak through timing.
 */
export const secretMatches = (presented: string, expected: string): boolean =>
  Crypto.timingSafeEqual(
    Crypto.createHash("sha256").update(presented, "utf8").digest(),
    Crypto.createHash("sha256").update(expected, "utf8").digest()
  ) && presented.length === expected.length
