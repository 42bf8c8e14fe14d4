import { spawnSync } from "node:child_process"
import * as Path from "node:path"
import type { TestProject } from "vitest/node"
import setup from "../support/globalSetup.js"
import { webBuildIsStale } from "../support/Local.js"

/**
 * Once per run of the browser suite: what every suite's setup does (`dist/` rebuilt when stale, the migrated
 * templates the platforms' data directories are copied from), and the web app, which `dist/main.js` serves from
 * `web/dist`, rebuilt when stale, so no test drives a page older than its sources.
 */
const ROOT = Path.resolve(import.meta.dirname, "../..")

export default async function browserSetup(project: TestProject) {
  if (webBuildIsStale(ROOT)) {
    const result = spawnSync("npm", ["run", "build:web"], { cwd: ROOT, stdio: "inherit" })
    if (result.status !== 0) throw new Error("npm run build:web failed: the browser suite needs web/dist/")
  }
  return setup(project)
}
