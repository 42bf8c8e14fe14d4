import * as HttpLayerRouter from "@effect/platform/HttpLayerRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Layer } from "effect"
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { extname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { AppConfig } from "./Config.js"
import { errorBody } from "./Errors.js"
import { errorResponse } from "./http/ErrorResponse.js"
import { pageHeaders } from "./http/Csp.js"

/**
 * The web app's pages (spec 4.10 rules 7-8 hand out these URLs). Every one answers the same `index.html`; the app
 * routes in the browser. Anything else stays the JSON 404.
 */
export const APP_PAGES = [
  "/",
  "/chat",
  "/chat/:identifier",
  "/studio",
  "/admin",
  "/studio/:identifier",
  // An expert's runs, schedules and the account's webhooks (issue 43 item 5).
  "/studio/:identifier/runs",
  "/studio/:identifier/schedules",
  "/studio/:identifier/webhooks",
  "/studio/:identifier/traces",
  "/studio/:identifier/evals",
  "/marketplace",
  "/marketplace/:identifier",
  // A creator's public page (issue 48 item 4), linked from their experts.
  "/creators/:id",
  "/earnings",
  "/wallet",
  "/keys",
  "/knowledge",
  // The test payment provider's checkout (PAYMENTS_PROVIDER=test); with it off the page says so.
  "/checkout"
] as const

const TYPES: Record<string, string> = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".html": "text/html; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
  ".woff2": "font/woff2",
  ".txt": "text/plain; charset=utf-8"
}

/**
 * A page of the app is revalidated on every load, and has the page policy (`platform/http/Csp.ts`): nothing from
 * another host, its own inline scripts by hash, never framed by another site (clickjacking).
 */
const pageHeadersOf = (html: string) => ({ "cache-control": "no-cache", ...pageHeaders(html) })

export interface WebBuild {
  readonly index: string
  /** `/assets/<name>` → bytes; names carry a content hash, so they are cached for good. */
  readonly assets: ReadonlyMap<string, Uint8Array>
}

/** Reads the Vite build once at start-up; none when `web/dist` was not built (`npm run build:web`). */
export const readWebBuild = (dir: string): WebBuild | undefined => {
  const indexPath = join(dir, "index.html")
  if (!existsSync(indexPath)) return undefined
  const assets = new Map<string, Uint8Array>()
  const assetsDir = join(dir, "assets")
  if (existsSync(assetsDir)) {
    for (const name of readdirSync(assetsDir)) {
      const path = join(assetsDir, name)
      if (statSync(path).isFile()) assets.set(name, readFileSync(path))
    }
  }
  return { index: readFileSync(indexPath, "utf8"), assets }
}

/**
 * `next` as a path on this site, or "/": never an open redirect to another host. Judged by the URL parser browsers
 * use, not by the text: it drops tabs and newlines and reads "\\" as "/", so "/\t/evil.com" and "/\\evil.com" are
 * "//evil.com" to `location.assign`.
 */
export const localPath = (requested: string): string => {
  if (!requested.startsWith("/")) return "/"
  try {
    const base = new URL("http://localhost")
    const url = new URL(requested, base)
    return url.origin === base.origin ? `${url.pathname}${url.search}${url.hash}` : "/"
  } catch {
    return "/"
  }
}

/** `next` as a script literal that cannot close the script element it sits in. */
const scriptLiteral = (value: string) =>
  JSON.stringify(value).replace(/</g, "\\u003c").replace(/>/g, "\\u003e").replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029")

/**
 * The login page: the app's `index.html` with one inline script that states where to go back (`next`, checked
 * here, on the server) and loads the app. The OAuth consent flow sends browsers here (`/login?next=...`).
 */
export const loginPage = (build: WebBuild, requestedNext: string): string => {
  const next = localPath(requestedNext)
  const entry = /<script type="module"[^>]*src="([^"]+)"[^>]*><\/script>/.exec(build.index)
  const withoutEntry = entry ? build.index.replace(entry[0], "") : build.index
  const script = `<script>const next = ${scriptLiteral(next)};\n` +
    `window.atriumLogin = { next: next, sendCode: "/api/auth/sms/sendCode", login: "/api/auth/login" };\n` +
    (entry ? `import(${scriptLiteral(entry[1]!)});` : "") + `</script>`
  return withoutEntry.replace("</body>", `${script}</body>`)
}

/** The package's folder: this file is `src/platform/WebApp.ts` or, built, `dist/platform/WebApp.js`. */
const PACKAGE_ROOT = fileURLToPath(new URL("../../", import.meta.url))

const notBuilt = () =>
  HttpServerResponse.unsafeJson(
    errorBody("web_app_not_built", "The web app is not built on this server: run `npm run build:web`."),
    { status: 503, headers: { "cache-control": "no-store" } }
  )

/**
 * Serves `WEB_DIST` (default `web/dist`; a relative path is the package's, wherever the process was started from):
 * the app's pages and its hashed assets. The
 * build is read once; without one, the pages answer 503 `web_app_not_built` and `/login` keeps the small
 * server-rendered page (`fallbackLogin`) so the OAuth flow works on an unbuilt checkout.
 */
export const makeWebAppRoutes = <E, R>(
  fallbackLogin: (next: string) => Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
) =>
  HttpLayerRouter.use((router) =>
    Effect.gen(function*() {
      const dir = resolve(PACKAGE_ROOT, (yield* AppConfig).webDist)
      const build = readWebBuild(dir)
      const page = build === undefined
        ? Effect.sync(notBuilt)
        : Effect.succeed(HttpServerResponse.text(build.index, { contentType: TYPES[".html"]!, headers: pageHeadersOf(build.index) }))
      for (const path of APP_PAGES) yield* router.add("GET", path, page)

      yield* router.add("GET", "/login", Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const next = localPath(new URL(request.url, "http://localhost").searchParams.get("next") ?? "/")
        if (build === undefined) return yield* fallbackLogin(next)
        const html = loginPage(build, next)
        return HttpServerResponse.text(html, { contentType: TYPES[".html"]!, headers: pageHeadersOf(html) })
      }))

      yield* router.add("GET", "/assets/*", Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const name = decodeURIComponent(new URL(request.url, "http://localhost").pathname.slice("/assets/".length))
        const bytes = build?.assets.get(name)
        if (bytes === undefined) {
          return errorResponse(404, "not_found", `No asset ${name}.`)
        }
        return HttpServerResponse.uint8Array(bytes, {
          contentType: TYPES[extname(name)] ?? "application/octet-stream",
          headers: { "cache-control": "public, max-age=31536000, immutable", "x-content-type-options": "nosniff" }
        })
      }))
    }).pipe(Effect.orDie)
  ).pipe(Layer.provide(AppConfig.Default))
