/**
 * The one reader of `Authorization: Bearer` (RFC 6750 2.1) for every route: HttpApi's middlewares, the tool server,
 * OAuth's consent pages, the server's own 401 for unknown `/api` routes and the operator's `/internal` bearer.
 *
 * The scheme's name is case-insensitive (RFC 7235 2.1), and the token is one run of visible characters after it.
 * A header that is there but not that (another scheme such as `Basic` or `Token`, `Bearer` with no token or with two
 * words) is `Malformed`: a credential gone wrong, never an absent one, so no caller falls back to the cookie or to
 * anonymous for it. HttpApi's own bearer decoder is not this: it cuts seven characters off any header.
 */

export type Authorization =
  | { readonly _tag: "None" }
  | { readonly _tag: "Malformed" }
  | { readonly _tag: "Bearer"; readonly token: string }

const BEARER = /^Bearer[ \t]+(\S+)$/i

/** What an `Authorization` header holds; an absent or blank one is `None`. */
export const parseAuthorization = (header: string | undefined): Authorization => {
  const value = header?.trim() ?? ""
  if (value === "") return { _tag: "None" }
  const bearer = BEARER.exec(value)
  return bearer === null ? { _tag: "Malformed" } : { _tag: "Bearer", token: bearer[1]! }
}

interface WithHeaders {
  readonly headers: { readonly [name: string]: string | undefined }
}

interface WithCookies extends WithHeaders {
  readonly cookies: { readonly [name: string]: string | undefined }
}

/** The request's bearer token, when its `Authorization` header is a well-formed Bearer. */
export const bearerTokenOf = (request: WithHeaders): string | undefined => {
  const parsed = parseAuthorization(request.headers["authorization"])
  return parsed._tag === "Bearer" ? parsed.token : undefined
}

/** Whether the request carries an `Authorization` header that is not a well-formed Bearer. */
export const isMalformed = (request: WithHeaders): boolean =>
  parseAuthorization(request.headers["authorization"])._tag === "Malformed"

/**
 * The credential of a request as the platform takes it (spec 5.2 rule 3, 5.4): the Bearer token, else, when no
 * `Authorization` header is sent at all, the `token` cookie of the browser's login.
 */
export type Credential =
  | { readonly _tag: "None" }
  | { readonly _tag: "Malformed" }
  | { readonly _tag: "Bearer"; readonly value: string }
  | { readonly _tag: "Cookie"; readonly value: string }

export const credentialOf = (request: WithCookies): Credential => {
  const parsed = parseAuthorization(request.headers["authorization"])
  if (parsed._tag === "Bearer") return { _tag: "Bearer", value: parsed.token }
  if (parsed._tag === "Malformed") return parsed
  const cookie = request.cookies["token"]
  return cookie !== undefined && cookie !== "" ? { _tag: "Cookie", value: cookie } : { _tag: "None" }
}

/** The credential's text: the token or the cookie, `""` when there is none (or none well-formed). */
export const credentialText = (credential: Credential): string =>
  credential._tag === "Bearer" || credential._tag === "Cookie" ? credential.value : ""
