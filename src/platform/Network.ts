import type { HttpServerRequest } from "@effect/platform"
import { Option } from "effect"
import * as Net from "node:net"

/**
 * The client's address: the socket's peer, or, when `TRUST_PROXY` is on, the left-most `X-Forwarded-For` entry
 * (what the proxy in front of us saw). Without `TRUST_PROXY` the header is ignored: anyone can write it.
 */
export const clientAddress = (request: HttpServerRequest.HttpServerRequest, trustProxy: boolean): string => {
  if (trustProxy) {
    const forwarded = request.headers["x-forwarded-for"]?.split(",")[0]?.trim()
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
      return privateV6.check(address, "ipv6")
    default:
      return false
  }
}
