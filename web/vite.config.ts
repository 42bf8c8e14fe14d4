import { defineConfig } from "vite"

/**
 * The web app: React compiled by esbuild's JSX transform (no Babel plugin), bundled with the platform's API contract
 * (`src/Api.ts` and the contract modules it imports, docs/architecture.md) so the browser client is derived from
 * it. The contract imports nothing of the server, so nothing here stubs Node: `test/web/bundle.test.ts` fails if
 * server code reaches a chunk. Each page is its own chunk (`main.tsx`); React and Effect are chunks of their own, so
 * a change to a page does not make browsers fetch them again. Output: `web/dist`, served by `src/Server.ts`.
 */
export default defineConfig({
  root: import.meta.dirname,
  base: "/",
  esbuild: { jsx: "automatic" },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    assetsDir: "assets",
    sourcemap: false,
    target: "es2022",
    rollupOptions: {
      output: {
        manualChunks: (id) =>
          /node_modules\/(react|react-dom|scheduler)\//.test(id)
            ? "react"
            : /node_modules\/(effect|@effect\/platform)\//.test(id)
            ? "effect"
            : undefined
      }
    }
  },
  logLevel: "warn"
})
