import { configDefaults, defineConfig } from "vitest/config"
import { scratchEnv } from "./test/support/Local.js"
import { SuiteSequencer } from "./test/support/Sequencer.js"
import { leftOutOf } from "./test/support/Suites.js"

// Services mode as the tests see it (`servicesMode` in test/support/TestServer.ts).
const services = process.env.DATABASE_URL !== undefined
const workers = 2

export default defineConfig({
  // vitest keeps each file's last duration here, one folder per mode (a file's length differs between them), outside
  // node_modules/, which "npm ci" deletes; `npm run test:durations` copies them to test/support/durations.json, which
  // the sequencer reads first (a clean clone has no cache).
  cacheDir: `.vitest-cache/${services ? "services" : "embedded"}`,
  test: {
    include: ["test/**/*.test.ts"],
    // A file that proves nothing more in the other mode runs in one suite only: test/support/Suites.ts says which
    // and why (docs/testing.md, "Which suite runs a file").
    exclude: [...configDefaults.exclude, ...leftOutOf(services ? "services" : "embedded")],
    // One migrated database per run that every test's own database is copied from (test/support/Templates.ts).
    globalSetup: ["test/support/globalSetup.ts"],
    // Longest files first, and files that start processes of their own not side by side (test/support/Sequencer.ts).
    sequence: { sequencer: SuiteSequencer },
    // Before each file: vitest's shared `it` put back as @effect/vitest made it (test/support/setupFile.ts).
    setupFiles: ["test/support/setupFile.ts"],
    // Every test file boots its own server and database; two cores want few at once. Services mode ran three (a file
    // waits much of its time on PostgreSQL, Redis and its runner processes), but three files of clusters (two or three
    // runner processes each, beside a server per file) starved the runners past the cluster's own budget: a shard
    // lock refresh past its 4 s deadline gives every shard of a runner up, and CI failed on tests that pass alone
    // (session 28: a 2-runner cluster never settling, a retry timing out, wallets unanswered). Two, as embedded.
    maxWorkers: workers,
    // A worker runs its files one after another in one module graph instead of re-importing Effect and the whole
    // platform for every file: that import was about half of a file's CPU time. Files still share nothing else:
    // each builds its own layers (server, database, store, and the cluster runner with its shard fences, which are
    // per runner: `ShardFences`), and no test mocks modules or changes process.env.
    isolate: false,
    // As many from the start: a worker left idle is stopped at once otherwise, and a stop racing the run's end
    // failed the run ("Terminating worker thread").
    minWorkers: workers,
    // Scratch files in memory where the machine has room for them (test/support/Local.ts, docs/testing.md).
    env: scratchEnv(),
    testTimeout: 60_000,
    hookTimeout: 120_000
  }
})
