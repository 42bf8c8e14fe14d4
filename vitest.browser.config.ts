import { defineConfig } from "vitest/config"
import { scratchEnv } from "./test/support/Local.js"

/**
 * The browser suite (`npm run test:browser`): the platform (`dist/main.js`, as `npm start` runs it) on a random port
 * and Debian's Chromium driven by playwright-core. Kept out of `npm test` (its files are `*.browser.ts`, which the
 * main config does not include), so the main suite needs no browser and no built web app.
 */
export default defineConfig({
  test: {
    include: ["test/browser/**/*.browser.ts"],
    // `dist/` and `web/dist/` rebuilt when stale, and the migrated template each platform's data starts as a copy of.
    globalSetup: ["test/browser/globalSetup.ts"],
    // Before each file: vitest's shared `it` put back as @effect/vitest made it (test/support/setupFile.ts); without it
    // a file's `it.layer` also started the previous file's platform and Chromium again.
    setupFiles: ["test/support/setupFile.ts"],
    // Two files at a time (each its own platform and Chromium): the suite mostly waits on streams and pages.
    maxWorkers: 2,
    minWorkers: 2,
    // As in the main suite: a worker keeps its module graph between files (each file still launches its own platform
    // process and Chromium).
    isolate: false,
    // Each platform's data and Chromium's profile in memory where there is room (test/support/Local.ts).
    env: scratchEnv(),
    testTimeout: 180_000,
    hookTimeout: 180_000
  }
})
