import { assert, describe, it } from "@effect/vitest"
import { bearerTokenOf, credentialOf, isMalformed, parseAuthorization } from "../../src/platform/http/Bearer.js"

/** The platform's one `Authorization: Bearer` reader (src/platform/http/Bearer.ts), case by case. */
describe("Bearer", () => {
  it("a Bearer token, the scheme in any case, blanks around it ignored", () => {
    for (const header of ["Bearer abc", "bearer abc", "BEARER  abc", "  Bearer\tabc  "]) {
      assert.deepStrictEqual(parseAuthorization(header), { _tag: "Bearer", token: "abc" }, header)
    }
  })

  it("no header, or a blank one, is None", () => {
    for (const header of [undefined, "", "   "]) assert.deepStrictEqual(parseAuthorization(header), { _tag: "None" })
  })

  it("another scheme, Bearer without a token or with two words is Malformed, never None", () => {
    for (const header of ["Basic dXNlcjpwYXNz", "Token sk_abc", "Bearer", "Bearer ", "Bearer a b", "Bearerabc"]) {
      assert.deepStrictEqual(parseAuthorization(header), { _tag: "Malformed" }, header)
    }
  })

  it("the credential: the bearer, else the cookie only when no Authorization is sent", () => {
    const request = (authorization: string | undefined, token?: string) => ({
      headers: authorization === undefined ? {} : { authorization },
      cookies: token === undefined ? {} : { token }
    })
    assert.deepStrictEqual(credentialOf(request("Bearer t1", "c1")), { _tag: "Bearer", value: "t1" })
    assert.deepStrictEqual(credentialOf(request(undefined, "c1")), { _tag: "Cookie", value: "c1" })
    assert.deepStrictEqual(credentialOf(request("Basic x", "c1")), { _tag: "Malformed" })
    assert.deepStrictEqual(credentialOf(request(undefined, "")), { _tag: "None" })
    assert.deepStrictEqual(credentialOf(request(undefined)), { _tag: "None" })
    assert.strictEqual(bearerTokenOf(request("Bearer sk_1")), "sk_1")
    assert.isUndefined(bearerTokenOf(request("Token sk_1")))
    assert.isTrue(isMalformed(request("Token sk_1")))
    assert.isFalse(isMalformed(request(undefined)))
  })
})
