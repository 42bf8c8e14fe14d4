import { spawnSync } from "node:child_process"
import * as Path from "node:path"
import type { TestProject } from "vitest/node"
import { buildIsStale } from "./Local.js"
import * as Crypto from "node:crypto"
import { dropRunDatabases, ensurePgliteTemplate, ensurePostgresTemplate, templateKey } from "./Templates.js"

/**
 * Once per vitest run, before any test file: the compiled build when it is stale, and the migrated templates that test storages start as copies of (see
 * `Templates.ts`); each is built only when its migrations changed.
 */
const ROOT = Path.resolve(import.meta.dirname, "../..")

/**
 * Tests that start the platform as a process run `dist/main.js`, what users run (`test/support/Process.ts`): a build
 * older than any source is made again first, so no test runs stale code (CI's `npm ci` has just built it).
 */
const buildIfStale = () => {
  if (!buildIsStale(ROOT)) return
  const result = spawnSync("npm", ["run", "build:server"], { cwd: ROOT, stdio: "inherit" })
  if (result.status !== 0) throw new Error("npm run build:server failed: the process tests need dist/")
}

export default async function setup(project: TestProject) {
  buildIfStale()
  const key = await templateKey()
  const databaseUrl = process.env.DATABASE_URL
  project.provide("atriumTemplateDatabase", databaseUrl ? await ensurePostgresTemplate(databaseUrl, key) : undefined)
  // Also in services mode: processes started without DATABASE_URL (test/main.test.ts) run embedded.
  project.provide("atriumTemplatePgdata", await ensurePgliteTemplate(key))
  const tag = Crypto.randomBytes(4).toString("hex")
  project.provide("atriumRunTag", tag)
  // Test databases are dropped without waiting (`testDatabase`); what a worker's end cut short goes here.
  return async () => {
    if (databaseUrl) await dropRunDatabases(databaseUrl, tag)
  }
}
