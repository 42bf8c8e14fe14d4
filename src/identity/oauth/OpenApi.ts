/**
 * The OAuth endpoints as the API document describes them. They are plain routes (`Http.ts` says why), so HttpApi
 * cannot derive them; this is written from those handlers and RFC 6749, and `test/openai/openapi.test.ts` drives
 * the real endpoints with what it says.
 */

const oauthError = {
  description: "RFC 6749 5.2 error",
  content: {
    "application/json": {
      schema: {
        type: "object",
        required: ["error"],
        properties: {
          error: {
            type: "string",
            enum: ["invalid_request", "invalid_client", "invalid_grant", "unauthorized_client", "unsupported_grant_type", "invalid_scope"]
          },
          error_description: { type: "string" }
        }
      }
    }
  }
}

/** A form-encoded request body (both OAuth POSTs take one, as RFC 6749 says). */
const formBody = (required: ReadonlyArray<string>, properties: Record<string, unknown>) => ({
  required: true,
  content: { "application/x-www-form-urlencoded": { schema: { type: "object", required, properties } } }
})

const authorizeParameters = [
  { name: "response_type", in: "query", required: true, schema: { type: "string", enum: ["code"] } },
  { name: "client_id", in: "query", required: true, schema: { type: "string" } },
  { name: "redirect_uri", in: "query", required: true, description: "One of the app's registered redirect URIs, exactly.", schema: { type: "string", format: "uri" } },
  { name: "scope", in: "query", required: false, description: "Space-separated: `events`, `agents:write`.", schema: { type: "string" } },
  { name: "state", in: "query", required: false, description: "Returned unchanged on the redirect.", schema: { type: "string" } },
  { name: "code_challenge", in: "query", required: true, description: "PKCE: base64url SHA-256 of the verifier.", schema: { type: "string" } },
  { name: "code_challenge_method", in: "query", required: true, schema: { type: "string", enum: ["S256"] } }
]

const backToTheApp = {
  description: "Back to `redirect_uri`: with `code` and `state` once approved, with `error` (and `state`) when denied " +
    "or when the request is invalid in a way the app may be told"
}

const notARegisteredApp = {
  description: "An unknown `client_id` or a `redirect_uri` the app did not register: a page, never a redirect",
  content: { "text/html": { schema: { type: "string" } } }
}

export const OAUTH_PATHS: Record<string, Record<string, unknown>> = {
  "/oauth/authorize": {
    get: {
      tags: ["OAuth"],
      operationId: "oauth.authorize",
      summary: "Ask the user to authorize an app",
      description: "Shows the logged-in user (the `token` cookie or a login Bearer token) what the app asks for, " +
        "with Allow and Deny, which post the same parameters back with `decision`.",
      security: [],
      parameters: authorizeParameters,
      responses: {
        "200": { description: "The consent page", content: { "text/html": { schema: { type: "string" } } } },
        "302": { description: `${backToTheApp.description}; to \`/login?next=...\` when nobody is logged in` },
        "400": notARegisteredApp
      }
    },
    post: {
      tags: ["OAuth"],
      operationId: "oauth.decide",
      summary: "The user's decision on the consent page",
      description: "The consent page's form: the authorization request's parameters and `decision` (`approve` or " +
        "`deny`), from the logged-in user's browser.",
      security: [],
      requestBody: formBody(["response_type", "client_id", "redirect_uri", "code_challenge", "code_challenge_method", "decision"], {
        ...Object.fromEntries(authorizeParameters.map((p) => [p.name, p.schema])),
        decision: { type: "string", enum: ["approve", "deny"] }
      }),
      responses: {
        "302": backToTheApp,
        "400": notARegisteredApp,
        "401": {
          description: "Nobody is logged in",
          content: { "application/json": { schema: { $ref: "#/components/schemas/Unauthorized" } } }
        }
      }
    }
  },
  "/oauth/token": {
    post: {
      tags: ["OAuth"],
      operationId: "oauth.token",
      summary: "Exchange a code or a refresh token for tokens",
      description: "The app authenticates with `client_id` and `client_secret` in the body or HTTP Basic. " +
        "`authorization_code` needs `code`, `redirect_uri` and the PKCE `code_verifier`; `refresh_token` rotates the " +
        "refresh token (a reused one revokes its whole family).",
      security: [],
      requestBody: formBody(["grant_type"], {
        grant_type: { type: "string", enum: ["authorization_code", "refresh_token"] },
        code: { type: "string" },
        redirect_uri: { type: "string" },
        code_verifier: { type: "string" },
        refresh_token: { type: "string" },
        client_id: { type: "string" },
        client_secret: { type: "string" }
      }),
      responses: {
        "200": {
          description: "Tokens",
          content: {
            "application/json": {
              schema: {
                type: "object",
                required: ["access_token", "token_type", "expires_in", "refresh_token", "scope"],
                properties: {
                  access_token: { type: "string" },
                  token_type: { type: "string", enum: ["Bearer"] },
                  expires_in: { type: "integer", description: "seconds" },
                  refresh_token: { type: "string" },
                  scope: { type: "string" }
                }
              }
            }
          }
        },
        "400": oauthError,
        "401": oauthError
      }
    }
  }
}

export const OAUTH_TAG = {
  name: "OAuth",
  description: "OAuth 2.0 with PKCE for third-party apps (RFC 6749, RFC 7636): the user authorizes, the app exchanges."
}
