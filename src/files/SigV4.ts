import * as Crypto from "node:crypto"

/**
 * AWS Signature Version 4, query-string form ("presigned URLs"), for any S3-compatible store. Written here with
 * `node:crypto` rather than taken from the AWS SDK: presigning is one small, well-specified algorithm, and the SDK
 * would be the largest dependency of the platform for it. Reference: "Authenticating Requests: Using Query
 * Parameters (AWS Signature Version 4)" in the Amazon S3 API reference; `test/files/sigv4.test.ts` checks the
 * example given there.
 */

export interface PresignInput {
  readonly method: "GET" | "PUT" | "DELETE" | "HEAD"
  /** The object's full URL without query (path-style `https://host/bucket/key` or virtual-hosted). */
  readonly url: string
  readonly region: string
  readonly service?: string
  readonly accessKeyId: string
  readonly secretAccessKey: string
  readonly sessionToken?: string | undefined
  /** The signing time (`X-Amz-Date`). */
  readonly date: Date
  /** Seconds the URL stays valid, 1 to 604800 (7 days, the S3 maximum). */
  readonly expiresIn: number
  /** Headers the request must carry with exactly these values (`host` is always signed). */
  readonly headers?: Readonly<Record<string, string>>
  /** Extra query parameters, signed too (e.g. `response-content-disposition`). */
  readonly query?: Readonly<Record<string, string>>
}

/** RFC 3986 encoding as SigV4 wants it: everything but `A-Z a-z 0-9 - _ . ~` is escaped, with upper-case hex. */
export const uriEncode = (text: string, keepSlash = false): string => {
  let out = ""
  for (const byte of Buffer.from(text, "utf8")) {
    const c = String.fromCharCode(byte)
    if (/[A-Za-z0-9\-_.~]/.test(c) || (keepSlash && c === "/")) out += c
    else out += `%${byte.toString(16).toUpperCase().padStart(2, "0")}`
  }
  return out
}

const sha256Hex = (data: string) => Crypto.createHash("sha256").update(data, "utf8").digest("hex")
const hmac = (key: Buffer | string, data: string) => Crypto.createHmac("sha256", key).update(data, "utf8").digest()

/** `20130524T000000Z` */
const amzDate = (date: Date) => date.toISOString().replace(/[-:]/g, "").replace(/\.\d{3}/, "")

export interface Presigned {
  readonly url: string
  /** The intermediate strings, for tests and for debugging a `SignatureDoesNotMatch`. */
  readonly canonicalRequest: string
  readonly stringToSign: string
  readonly signature: string
}

export const presign = (input: PresignInput): Presigned => {
  const url = new URL(input.url)
  const service = input.service ?? "s3"
  const timestamp = amzDate(input.date)
  const day = timestamp.slice(0, 8)
  const scope = `${day}/${input.region}/${service}/aws4_request`

  const headers = new Map<string, string>([["host", url.host]])
  for (const [name, value] of Object.entries(input.headers ?? {})) {
    headers.set(name.toLowerCase(), value.trim().replace(/\s+/g, " "))
  }
  const headerNames = [...headers.keys()].sort()
  const signedHeaders = headerNames.join(";")

  const query: Record<string, string> = {
    ...input.query,
    "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
    "X-Amz-Credential": `${input.accessKeyId}/${scope}`,
    "X-Amz-Date": timestamp,
    "X-Amz-Expires": String(input.expiresIn),
    "X-Amz-SignedHeaders": signedHeaders,
    ...(input.sessionToken !== undefined ? { "X-Amz-Security-Token": input.sessionToken } : {})
  }
  const canonicalQuery = Object.entries(query)
    .map(([key, value]) => [uriEncode(key), uriEncode(value)] as const)
    .sort(([a, av], [b, bv]) => (a < b ? -1 : a > b ? 1 : av < bv ? -1 : av > bv ? 1 : 0))
    .map(([key, value]) => `${key}=${value}`)
    .join("&")

  // S3 encodes the path once (other services twice); the URL parser has already percent-encoded what needed it,
  // so decode first and encode by SigV4's rules.
  const canonicalPath = uriEncode(decodeURIComponent(url.pathname), true) || "/"

  const canonicalRequest = [
    input.method,
    canonicalPath,
    canonicalQuery,
    headerNames.map((name) => `${name}:${headers.get(name)}\n`).join(""),
    signedHeaders,
    "UNSIGNED-PAYLOAD"
  ].join("\n")

  const stringToSign = ["AWS4-HMAC-SHA256", timestamp, scope, sha256Hex(canonicalRequest)].join("\n")

  const signingKey = hmac(hmac(hmac(hmac(`AWS4${input.secretAccessKey}`, day), input.region), service), "aws4_request")
  const signature = Crypto.createHmac("sha256", signingKey).update(stringToSign, "utf8").digest("hex")

  return {
    url: `${url.origin}${canonicalPath}?${canonicalQuery}&X-Amz-Signature=${signature}`,
    canonicalRequest,
    stringToSign,
    signature
  }
}
