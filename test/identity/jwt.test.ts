import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import * as Jose from "jose"
import * as Crypto from "node:crypto"
import { verifyHs256 } from "../../src/identity/Tokens.js"

/**
 * The synchronous HS256 check behind login tokens and OAuth access tokens: it must accept exactly what jose signs
 * and refuse everything jose's own `jwtVerify` refuses. Tokens are made by jose, or by hand where jose would not
 * make them.
 */

const key = new TextEncoder().encode("a-test-secret-of-some-length-0123456789")
const NOW = 1_800_000_000

const sign = (payload: Record<string, unknown>, header: Jose.JWTHeaderParameters = { alg: "HS256", typ: "JWT" }) =>
  new Jose.SignJWT(payload).setProtectedHeader(header).sign(key)

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url")
/** A token assembled by hand, signed with `key` unless a signature is given. */
const handMade = (header: unknown, payload: unknown, signature?: string) => {
  const input = `${b64(header)}.${b64(payload)}`
  return `${input}.${signature ?? Crypto.createHmac("sha256", key).update(input).digest("base64url")}`
}

describe("verifyHs256", () => {
  it("accepts a token jose signed, and gives its payload", async () => {
    const token = await sign({ sub: "u1", iat: NOW, exp: NOW + 60 })
    assert.deepStrictEqual(verifyHs256(token, key, NOW), Option.some({ sub: "u1", iat: NOW, exp: NOW + 60 }))
    // jose agrees, so both sides of the comparison are real.
    const { payload } = await Jose.jwtVerify(token, key, { algorithms: ["HS256"], currentDate: new Date(NOW * 1000) })
    assert.strictEqual(payload.sub, "u1")
  })

  it("refuses another key, an altered payload or header, and a cut token", async () => {
    const token = await sign({ sub: "u1", exp: NOW + 60 })
    const [head, body, signature] = token.split(".") as [string, string, string]
    assert.isTrue(Option.isNone(verifyHs256(token, new TextEncoder().encode("another-secret"), NOW)))
    assert.isTrue(Option.isNone(verifyHs256(`${head}.${b64({ sub: "u2", exp: NOW + 60 })}.${signature}`, key, NOW)))
    assert.isTrue(Option.isNone(verifyHs256(`${b64({ alg: "HS256" })}.${body}.${signature}`, key, NOW)))
    assert.isTrue(Option.isNone(verifyHs256(`${head}.${body}`, key, NOW)))
    assert.isTrue(Option.isNone(verifyHs256(`${head}.${body}.`, key, NOW)))
    assert.isTrue(Option.isNone(verifyHs256(`${token}.x`, key, NOW)))
    assert.isTrue(Option.isNone(verifyHs256("", key, NOW)))
  })

  it("refuses a signature that is not the canonical encoding of the HMAC (padding, other trailing bits)", async () => {
    const token = await sign({ sub: "u1", exp: NOW + 60 })
    const [head, body, signature] = token.split(".") as [string, string, string]
    assert.isTrue(Option.isNone(verifyHs256(`${head}.${body}.${signature}=`, key, NOW)))
    // 32 bytes are 43 base64url characters; the last carries 2 unused bits. Another value for them decodes to the
    // same bytes, but is not the token that was signed.
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    const last = alphabet.indexOf(signature.at(-1)!)
    const twin = `${signature.slice(0, -1)}${alphabet[last ^ 1]}`
    assert.deepStrictEqual(Buffer.from(twin, "base64url"), Buffer.from(signature, "base64url"))
    assert.isTrue(Option.isNone(verifyHs256(`${head}.${body}.${twin}`, key, NOW)))
  })

  it("refuses any algorithm but HS256, `none` included, and headers it does not understand", () => {
    assert.isTrue(Option.isNone(verifyHs256(handMade({ alg: "none" }, { sub: "u1" }, "AAAA"), key, NOW)))
    assert.isTrue(Option.isNone(verifyHs256(`${b64({ alg: "none" })}.${b64({ sub: "u1" })}.`, key, NOW)))
    assert.isTrue(Option.isNone(verifyHs256(handMade({ alg: "HS512" }, { sub: "u1" }), key, NOW)))
    assert.isTrue(Option.isNone(verifyHs256(handMade({ typ: "JWT" }, { sub: "u1" }), key, NOW)))
    assert.isTrue(Option.isNone(verifyHs256(handMade({ alg: "HS256", crit: ["exp"] }, { sub: "u1" }), key, NOW)))
    assert.isTrue(Option.isNone(verifyHs256(handMade({ alg: "HS256", b64: false }, { sub: "u1" }), key, NOW)))
    assert.isTrue(Option.isSome(verifyHs256(handMade({ alg: "HS256" }, { sub: "u1" }), key, NOW)))
  })

  it("refuses a payload that is not a JSON object, and times that are not numbers", () => {
    for (const payload of [[1, 2], "text", 7, null]) {
      assert.isTrue(Option.isNone(verifyHs256(handMade({ alg: "HS256" }, payload), key, NOW)), JSON.stringify(payload))
    }
    for (const claim of ["exp", "nbf", "iat"]) {
      assert.isTrue(Option.isNone(verifyHs256(handMade({ alg: "HS256" }, { [claim]: String(NOW + 60) }), key, NOW)), claim)
    }
    const input = `${b64({ alg: "HS256" })}.${Buffer.from("{not json").toString("base64url")}`
    const token = `${input}.${Crypto.createHmac("sha256", key).update(input).digest("base64url")}`
    assert.isTrue(Option.isNone(verifyHs256(token, key, NOW)))
  })

  it("refuses a token from its exp on, and before its nbf", async () => {
    const token = await sign({ sub: "u1", exp: NOW + 60, nbf: NOW - 10 })
    assert.isTrue(Option.isSome(verifyHs256(token, key, NOW + 59)))
    assert.isTrue(Option.isNone(verifyHs256(token, key, NOW + 60)))
    assert.isTrue(Option.isNone(verifyHs256(token, key, NOW - 11)))
    assert.isTrue(Option.isSome(verifyHs256(token, key, NOW - 10)))
  })
})
