import { AwsV4Signer } from "aws4fetch"

/**
 * Presigned S3 URLs (AWS Signature Version 4, query-string form) for any S3-compatible store, signed by `aws4fetch`
 * (WebCrypto, no SDK). `test/files/presign.test.ts` checks the worked example of the Amazon S3 API reference.
 */

export interface PresignInput {
  readonly method: "GET" | "PUT" | "DELETE" | "HEAD"
  /** The object's full URL without query (path-style `https://host/bucket/key` or virtual-hosted). */
  readonly url: string
  readonly region: string
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

const amzDate = (date: Date) => date.toISOString().replace(/[:-]|\.\d{3}/g, "")

export const presign = async (input: PresignInput): Promise<string> => {
  const url = new URL(input.url)
  url.searchParams.set("X-Amz-Expires", String(input.expiresIn))
  for (const [name, value] of Object.entries(input.query ?? {})) url.searchParams.set(name, value)
  const signer = new AwsV4Signer({
    url: url.toString(),
    method: input.method,
    headers: { ...input.headers },
    accessKeyId: input.accessKeyId,
    secretAccessKey: input.secretAccessKey,
    ...(input.sessionToken !== undefined ? { sessionToken: input.sessionToken } : {}),
    region: input.region,
    service: "s3",
    signQuery: true,
    // Sign every header given: a signed Content-Length makes the store refuse a body of any other size.
    allHeaders: true,
    datetime: amzDate(input.date)
  })
  const signed = (await signer.sign()).url
  // URLSearchParams writes a space as `+`, which S3 may read as a plus; the signature covers the RFC 3986 form, so the
  // URL carries that form too.
  const query = [...signed.searchParams].map(([name, value]) => `${uriEncode(name)}=${uriEncode(value)}`).join("&")
  return `${signed.origin}${signed.pathname}?${query}`
}
