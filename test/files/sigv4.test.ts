import { assert, describe, it } from "@effect/vitest"
import { presign, uriEncode } from "../../src/files/SigV4.js"

/**
 * The S3 presigner is checked against the worked example of the Amazon S3 API reference ("Authenticating Requests:
 * Using Query Parameters (AWS Signature Version 4)"): GET examplebucket/test.txt, 24 May 2013, valid 86400 s, with
 * the documentation's example credentials. No S3 is reachable from the tests; this vector is what AWS itself
 * publishes, so a presigner that reproduces it byte for byte signs as S3 verifies.
 */
const example = {
  url: "https://examplebucket.s3.amazonaws.com/test.txt",
  region: "us-east-1",
  accessKeyId: "AKIAIOSFODNN7EXAMPLE",
  secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
  date: new Date("2013-05-24T00:00:00Z"),
  expiresIn: 86400
}

describe("SigV4 query presigning", () => {
  it("reproduces the AWS example vector", () => {
    const signed = presign({ method: "GET", ...example })
    assert.strictEqual(
      signed.canonicalRequest,
      [
        "GET",
        "/test.txt",
        "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request" +
        "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host",
        "host:examplebucket.s3.amazonaws.com",
        "",
        "host",
        "UNSIGNED-PAYLOAD"
      ].join("\n")
    )
    assert.strictEqual(
      signed.stringToSign,
      [
        "AWS4-HMAC-SHA256",
        "20130524T000000Z",
        "20130524/us-east-1/s3/aws4_request",
        "3bfa292879f6447bbcda7001decf97f4a54dc650c8942174ae0a9121cf58ad04"
      ].join("\n")
    )
    assert.strictEqual(signed.signature, "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404")
    assert.strictEqual(
      signed.url,
      "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256" +
        "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z" +
        "&X-Amz-Expires=86400&X-Amz-SignedHeaders=host" +
        "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
    )
  })

  it("signs the method, extra headers and extra query parameters", () => {
    const get = presign({ method: "GET", ...example }).signature
    const put = presign({ method: "PUT", ...example })
    const del = presign({ method: "DELETE", ...example })
    assert.notStrictEqual(put.signature, get)
    assert.notStrictEqual(del.signature, get)
    assert.notStrictEqual(put.signature, del.signature)
    assert.match(put.canonicalRequest, /^PUT\n/)

    // A signed Content-Length: S3 then refuses a body of any other size.
    const sized = presign({ method: "PUT", ...example, headers: { "Content-Length": "42" } })
    assert.include(sized.canonicalRequest, "content-length:42\nhost:examplebucket.s3.amazonaws.com\n\ncontent-length;host\n")
    assert.include(sized.url, "X-Amz-SignedHeaders=content-length%3Bhost")

    const query = presign({
      method: "GET",
      ...example,
      query: { "response-content-disposition": "attachment; filename=\"a b.txt\"" }
    })
    // Sorted by code point: upper-case `X-Amz-*` before lower-case names.
    assert.include(query.url, "X-Amz-SignedHeaders=host&response-content-disposition=attachment%3B%20filename%3D%22a%20b.txt%22&X-Amz-Signature=")
    assert.notStrictEqual(query.signature, get)
  })

  it("encodes keys the way S3 canonicalises them", () => {
    assert.strictEqual(uriEncode("a b/c~d*é", true), "a%20b/c~d%2A%C3%A9")
    assert.strictEqual(uriEncode("a/b"), "a%2Fb")
    const signed = presign({ method: "GET", ...example, url: "https://host.example/bucket/dir/a%20b.txt" })
    assert.match(signed.canonicalRequest, /^GET\n\/bucket\/dir\/a%20b\.txt\n/)
    assert.include(signed.url, "https://host.example/bucket/dir/a%20b.txt?")
  })
})
