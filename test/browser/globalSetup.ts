import { spawnSync } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"
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
const ASSETS = Path.join(ROOT, "web", "dist", "assets")

/**
 * Whether `web/dist` holds React's production build: only that build has the "Minified React error" messages. Vite
 * bundles whichever React `NODE_ENV` names, and vitest sets it to `test`: a build started from here without saying
 * otherwise was React's development build, whose StrictMode runs every effect twice (the wallet read twice on a page
 * that reads it once, issue 48), so the suite checked another app than the one `npm run build:web` makes.
 */
const productionReact = () =>
  readdirSync(ASSETS).some((file) => file.endsWith(".js") && readFileSync(Path.join(ASSETS, file), "utf8").includes("Minified React error"))

export default async function browserSetup(project: TestProject) {
  if (webBuildIsStale(ROOT)) {
    const result = spawnSync("npm", ["run", "build:web"], { cwd: ROOT, stdio: "inherit", env: { ...process.env, NODE_ENV: "production" } })
    if (result.status !== 0) throw new Error("npm run build:web failed: the browser suite needs web/dist/")
  }
  if (!productionReact()) {
    throw new Error("web/dist holds React's development build (NODE_ENV was not `production` when it was built): run `npm run build:web` again")
  }
  return setup(project)
}
