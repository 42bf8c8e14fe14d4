import { defineConfig, type Plugin } from "vite"

/**
 * The API group files (`src/* /Api.ts`) import their error classes and middleware tags from the service modules,
 * which reach Node-only code (node:*, pg, ioredis, PGlite, the Node platform). None of it runs when the browser
 * only reads the `HttpApi` definition, so each such module is replaced by one inert stub that has every export
 * (`syntheticNamedExports`). A call into it would throw, which is what we want to hear about.
 */
const NODE_ONLY = /^(node:|@effect\/platform-node|@effect\/sql-pg|@effect\/cluster|@effect\/workflow|@effect\/ai|@electric-sql\/|pg$|pg-|ioredis|jose|@modelcontextprotocol\/|zod|tsx|msgpackr|(fs|path|os|crypto|stream|http|https|net|tls|url|util|events|child_process|worker_threads|zlib|buffer|dns|assert|async_hooks|perf_hooks|timers|readline|string_decoder|querystring|v8|vm)(\/.*)?$)/
/** The sandbox host names its guest script with `new URL(..., import.meta.url)`, which Vite would copy into the
 * public assets: the server's sandbox source must not be served, so the module is stubbed like the rest. */
const SERVER_ONLY = /(^|\/)WasmSandbox\.js$/
const STUB = "\0atrium-node-stub"
const nodeStub: Plugin = {
  name: "atrium-node-stub",
  enforce: "pre",
  resolveId(id) {
    return NODE_ONLY.test(id) || SERVER_ONLY.test(id) ? STUB : null
  },
  load(id) {
    if (id !== STUB) return null
    return {
      code: `const handler = { get: (_t, key) => key === "__esModule" ? false : key === Symbol.toPrimitive ? () => "" : stub,
  apply: () => stub, construct: () => stub }
const stub = new Proxy(function () {}, handler)
export default stub`,
      syntheticNamedExports: "default"
    }
  }
}

/**
 * The web app: React compiled by esbuild's JSX transform (no Babel plugin), bundled with the platform's own
 * `HttpApi` definition so the browser client is derived from it. Output: `web/dist`, served by `src/Server.ts`.
 */
export default defineConfig({
  root: import.meta.dirname,
  base: "/",
  plugins: [nodeStub],
  esbuild: { jsx: "automatic" },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    assetsDir: "assets",
    sourcemap: false,
    chunkSizeWarningLimit: 4000,
    target: "es2022"
  },
  logLevel: "warn"
})
