import { defineConfig } from "vitest/config"

/**
 * Entity tests (`Entity.makeTestClient`, docs/testing.md) run as a project of their own. A worker keeps its module
 * graph between files (`isolate: false`, below), and `src/platform/Cluster.ts` keeps its shard fences in module
 * state: once a services-mode file in the worker booted the platform (its `TrackedRunnerStorage` marks the process as
 * a cluster runner), an entity built later in that worker without a runner found its shard unheld, and its
 * `takeFence` slept on the test's `TestClock` forever. vitest runs each project's files on workers of their own
 * (recycled between projects), so the entity tests start from a fresh module graph in both modes.
 */
const entityTests = ["test/**/*-entity.test.ts"]

/**
 * What each project's files run with. Not inherited from the root (`extends`): the root's `globalSetup` runs once for
 * the whole run (vitest always runs the root project's), and a project that inherited it ran it again.
 */
const perFile = {
  // A worker runs its files one after another in one module graph instead of re-importing Effect and the whole
  // platform for every file: that import was about half of a file's CPU time. Files still share nothing else:
  // each builds its own layers (server, database, store), and no test mocks modules or changes process.env.
  isolate: false,
  testTimeout: 60_000,
  hookTimeout: 120_000
}

export default defineConfig({
  // vitest keeps each file's last duration here and starts the longest files first, so no long file is left to run
  // alone at the end on one of the two workers. Outside node_modules/, which "npm ci" (CI's first step) deletes:
  // there the durations were lost every run and files ran largest first instead.
  cacheDir: ".vitest-cache",
  test: {
    // One migrated database per run that every test's own database is copied from (test/support/Templates.ts); its
    // values reach every project (`inject`).
    globalSetup: ["test/support/globalSetup.ts"],
    // Every test file boots its own server and database; two cores want few at once.
    maxWorkers: 2,
    minWorkers: 1,
    ...perFile,
    projects: [
      { test: { name: "platform", include: ["test/**/*.test.ts"], exclude: entityTests, ...perFile } },
      { test: { name: "entity", include: entityTests, ...perFile } }
    ]
  }
})
