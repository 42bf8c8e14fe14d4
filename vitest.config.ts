import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Every test file boots its own server and database; two cores want few at once.
    maxWorkers: 2,
    minWorkers: 1,
    testTimeout: 60_000,
    hookTimeout: 120_000
  }
})
