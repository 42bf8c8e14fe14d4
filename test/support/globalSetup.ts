import type { TestProject } from "vitest/node"
import { ensurePgliteTemplate, ensurePostgresTemplate, templateKey } from "./Templates.js"

/**
 * Once per vitest run, before any test file: the migrated templates that test storages start as copies of (see
 * `Templates.ts`); each is built only when its migrations changed.
 */
export default async function setup(project: TestProject) {
  const key = await templateKey()
  const databaseUrl = process.env.DATABASE_URL
  project.provide("atriumTemplateDatabase", databaseUrl ? await ensurePostgresTemplate(databaseUrl, key) : undefined)
  // Also in services mode: processes started without DATABASE_URL (test/main.test.ts) run embedded.
  project.provide("atriumTemplatePgdata", await ensurePgliteTemplate(key))
}
