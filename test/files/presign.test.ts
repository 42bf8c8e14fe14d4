import { assert, describe, it } from "@effect/vitest"
import { presign, uriEncode } from "../../src/files/Presign.js"

/**
 * The S3 presigner is checked against the worked example of the Amazon S3 API reference ("Authenticating Requests:
 * Using Query Parameters (AWS Signature Version 4)"): GET examplebucket/test.txt, 24 May 2013, valid 86400 s, with
 * the documentation's example credentials. No S3 is reachable from the tests; this vector is what AWS itself
 * publishes, so a presigner that reproduces it signs as S3 verifies.
 */
const example = {
  url: "https://examplebucket.s3.amazonaws.com/test.txt",
  region: "us-east-1",
  accessKeyId: "AKIAIOSFODNN7EXAMPLE",
  secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
  date: new Date("2013-05-24T00:00:00Z"),
  expiresIn: 86400
}

const params = (url: string) => Object.fromEntries(new URL(url).searchParams)
const signatureOf = (url: string) => params(url)["X-Amz-Signature"]

describe("S3 query presigning", () => {
  it("reproduces the AWS example vector", async () => {
    const url = await presign({ method: "GET", ...example })
    assert.isTrue(url.startsWith("https://examplebucket.s3.amazonaws.com/test.txt?"))
    assert.deepStrictEqual(params(url), {
      "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
      "X-Amz-Credential": "AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request",
      "X-Amz-Date": "20130524T000000Z",
      "X-Amz-Expires": "86400",
      "X-Amz-SignedHeaders": "host",
      "X-Amz-Signature": "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
    })
  })

  it("signs the method, extra headers and extra query parameters, and writes the query in RFC 3986 form", async () => {
    const get = signatureOf(await presign({ method: "GET", ...example }))
    const put = signatureOf(await presign({ method: "PUT", ...example }))
    const del = signatureOf(await presign({ method: "DELETE", ...example }))
    assert.notStrictEqual(put, get)
    assert.notStrictEqual(del, get)
    assert.notStrictEqual(put, del)

    // A signed Content-Length: S3 then refuses a body of any other size.
    const sized = await presign({ method: "PUT", ...example, headers: { "Content-Length": "42" } })
    assert.strictEqual(params(sized)["X-Amz-SignedHeaders"], "content-length;host")
    assert.notStrictEqual(signatureOf(sized), put)

    const query = await presign({
      method: "GET",
      ...example,
      query: { "response-content-disposition": "attachment; filename=\"a b.txt\"" }
    })
    assert.include(query, "response-content-disposition=attachment%3B%20filename%3D%22a%20b.txt%22")
    assert.notInclude(query, "+")
    assert.notStrictEqual(signatureOf(query), get)
  })

  it("encodes keys the way S3 canonicalises them", async () => {
    assert.strictEqual(uriEncode("a b/c~d*é", true), "a%20b/c~d%2A%C3%A9")
    assert.strictEqual(uriEncode("a/b"), "a%2Fb")
    const signed = await presign({ method: "GET", ...example, url: "https://host.example/bucket/dir/a%20b.txt" })
    assert.isTrue(signed.startsWith("https://host.example/bucket/dir/a%20b.txt?"))
  })
})
