import { assert, describe, it } from "@effect/vitest"
import { networkInterfaces } from "node:os"
import {
  canonicalAddress,
  checkUrl,
  isPrivateAddress,
  makeHostAddresses,
  OutboundRefused
} from "../../src/runtime/tools/Outbound.js"

/**
 * Issue 26 item 5: the outbound block list for tool traffic (remote MCP servers) refuses every IANA special-purpose
 * range, IPv4 embedded in any IPv6 form, and this host's own interface addresses, read at start and refreshed.
 * Pure checks: no request leaves the machine (IP literals resolve to themselves).
 */

const refused = async (url: string, own: ReadonlySet<string> = new Set()) => {
  try {
    await checkUrl(new URL(url), new Set(), own)
  } catch (error) {
    if (error instanceof OutboundRefused) return true
    throw error
  }
  return false
}

const v4ToInt = (address: string) => address.split(".").reduce((sum, byte) => sum * 256 + Number(byte), 0)
const intToV4 = (n: number) => [24, 16, 8, 0].map((shift) => Math.floor(n / 2 ** shift) % 256).join(".")

/** IANA's IPv4 special-purpose registry (and multicast), as of 2026: the first and last address of each are refused. */
const SPECIAL_V4 = [
  "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24",
  "192.0.0.0/29", "192.0.0.8/32", "192.0.0.9/32", "192.0.0.10/32", "192.0.0.170/32", "192.0.0.171/32",
  "192.0.2.0/24", "192.31.196.0/24", "192.52.193.0/24", "192.88.99.0/24", "192.168.0.0/16", "192.175.48.0/24",
  "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4", "255.255.255.255/32"
]

/** IANA's IPv6 special-purpose registry (and multicast, site-local): an address in each is refused. */
const SPECIAL_V6 = [
  "::1", "::", "::ffff:127.0.0.1", "64:ff9b::a00:1", "64:ff9b:1::1", "64:ff9b:1:ffff::5db8:d822", "100::1",
  "100:0:0:1::1", "2001::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001:1::1", "2001:1::2", "2001:1::3",
  "2001:2::1", "2001:3::1", "2001:4:112::1", "2001:10::1", "2001:20::1", "2001:30::1", "2001:1ff::1",
  "2001:db8::1", "2002:a00:1::1", "2620:4f:8000::1", "3fff::1", "5f00::1", "fc00::1", "fd00:ec2::254",
  "fe80::1", "febf::1", "fec0::1", "ff02::1"
]

describe("security: outbound addresses", () => {
  it("every IANA special-purpose IPv4 range is refused, first and last address", async () => {
    for (const range of SPECIAL_V4) {
      const [network, prefix] = range.split("/") as [string, string]
      const first = v4ToInt(network)
      const last = first + 2 ** (32 - Number(prefix)) - 1
      for (const address of [intToV4(first), intToV4(last)]) {
        assert.isTrue(isPrivateAddress(address), `${range}: ${address}`)
        assert.isTrue(await refused(`http://${address}/mcp`), `${range}: ${address}`)
      }
    }
  })

  it("all of 192.0.2.0/24 is refused (the address this machine's eth0 had)", async () => {
    for (let i = 0; i < 256; i++) assert.isTrue(await refused(`http://192.0.2.${i}:8080/mcp`), `192.0.2.${i}`)
  })

  it("every IANA special-purpose IPv6 range is refused", async () => {
    for (const address of SPECIAL_V6) {
      assert.isTrue(isPrivateAddress(address), address)
      assert.isTrue(await refused(`http://[${address}]/mcp`), address)
    }
  })

  it("IPv4 embedded in IPv6, in every form, is judged as the IPv4 address: the spellings that reached loopback", async () => {
    for (
      const address of [
        "::7f00:1", // IPv4-compatible (deprecated)
        "::127.0.0.1",
        "2002:7f00:1::", // 6to4
        "2002:a9fe:a9fe::1", // 6to4 of the metadata address
        "64:ff9b::7f00:1", // NAT64 well-known prefix
        "64:ff9b::169.254.169.254",
        "64:ff9b:1::7f00:1", // NAT64 local-use
        "::ffff:7f00:1", // IPv4-mapped
        "::ffff:10.0.0.1",
        "::ffff:0:7f00:1", // IPv4-translated (SIIT)
        "::ffff:0:192.0.2.2",
        "0:0:0:0:0:ffff:7f00:0001"
      ]
    ) {
      assert.isTrue(isPrivateAddress(address), address)
      assert.isTrue(await refused(`http://[${address}]:3000/`), address)
    }
    // The same forms of a public IPv4 address reach that public address: they are not refused.
    for (const address of ["::ffff:93.184.216.34", "64:ff9b::5db8:d822", "2002:5db8:d822::1"]) {
      assert.isFalse(isPrivateAddress(address), address)
    }
  })

  it("public addresses pass", async () => {
    for (const address of ["93.184.216.34", "8.8.8.8", "1.1.1.1", "192.0.3.1", "198.20.0.1", "2606:4700:4700::1111"]) {
      assert.isFalse(isPrivateAddress(address), address)
    }
    assert.isFalse(await refused("http://93.184.216.34/mcp"))
    assert.isFalse(await refused("http://[2606:4700:4700::1111]/mcp"))
  })

  it("this host's own interface addresses are refused, read at start and refreshed", async () => {
    let interfaces: Record<string, Array<{ address: string }>> = { eth0: [{ address: "93.184.216.34" }] }
    let clock = 0
    const own = makeHostAddresses(() => interfaces, 1000, () => clock)
    assert.isTrue(await refused("http://93.184.216.34/mcp", own()))
    // IPv4-mapped, the same host.
    assert.isTrue(await refused("http://[::ffff:93.184.216.34]/mcp", own()))
    // The host got a new address: refused once the list is refreshed, and the old one no longer is.
    interfaces = { eth0: [{ address: "203.0.114.7" }, { address: "2606:2800:220:1:248:1893:25c8:1946" }] }
    assert.isFalse(await refused("http://203.0.114.7/mcp", own()))
    clock = 1000
    assert.isTrue(await refused("http://203.0.114.7/mcp", own()))
    assert.isTrue(await refused("http://[2606:2800:220:1:248:1893:25c8:1946]/mcp", own()))
    assert.isFalse(await refused("http://93.184.216.34/mcp", own()))
    // The real machine: each of its interface addresses is refused through the default reader.
    const real = makeHostAddresses()()
    for (const entries of Object.values(networkInterfaces())) {
      for (const entry of entries ?? []) {
        assert.isTrue(real.has(canonicalAddress(entry.address)), entry.address)
        const literal = entry.family === "IPv6" ? `[${entry.address.split("%")[0]}]` : entry.address
        assert.isTrue(await refused(`http://${literal}:8080/`, real), entry.address)
      }
    }
  })

  it("what is not an address or not http(s) is refused", async () => {
    assert.isTrue(isPrivateAddress("not-an-address"))
    assert.isTrue(await refused("file:///etc/passwd"))
    assert.isTrue(await refused("gopher://93.184.216.34/"))
    // The URL parser's spellings of loopback (decimal, hex, short forms) are loopback.
    for (const url of ["http://2130706433/", "http://0x7f.1/", "http://127.1/", "http://0/", "http://[::]/"]) {
      assert.isTrue(await refused(url), url)
    }
  })
})
