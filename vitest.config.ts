import { configDefaults, defineConfig } from "vitest/config"
import { scratchEnv } from "./test/support/Local.js"
import { leftOutOf } from "./test/support/Suites.js"

// Services mode as the tests see it (`servicesMode` in test/support/TestServer.ts).
const services = process.env.DATABASE_URL !== undefined
const workers = services ? 3 : 2

export default defineConfig({
  // vitest keeps each file's last duration here and starts the longest files first, so no long file is left to run
  // alone at the end on one worker. Outside node_modules/, which "npm ci" deletes.
  cacheDir: ".vitest-cache",
  test: {
    include: ["test/**/*.test.ts"],
    // A file that proves nothing more in the other mode runs in one suite only: test/support/Suites.ts says which
    // and why (docs/testing.md, "Which suite runs a file").
    exclude: [...configDefaults.exclude, ...leftOutOf(services ? "services" : "embedded")],
    // One migrated database per run that every test's own database is copied from (test/support/Templates.ts).
    globalSetup: ["test/support/globalSetup.ts"],
    // Every test file boots its own server and database; two cores want few at once. Against PostgreSQL and Redis a
    // file spends much of its time waiting on them and on its runner processes (the suite's CPU time is about its
    // wall time with two workers), so a third file runs meanwhile.
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
