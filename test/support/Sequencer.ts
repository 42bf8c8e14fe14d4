import * as Path from "node:path"
import { BaseSequencer, type TestSpecification } from "vitest/node"
import { type Mode, plan, recordedDurations, startsProcesses } from "./Durations.js"

/** The run's mode, as vitest.config.ts and `servicesMode` (TestServer.ts) read it; neither can be imported here. */
const modeOfRun = (): Mode => process.env.DATABASE_URL !== undefined ? "services" : "embedded"

/**
 * The order a suite's files are handed to its workers (docs/testing.md, "Time"): each free worker takes the next file,
 * so the order decides how the files pack onto the two workers, and which files run side by side.
 *
 * - Longest first, so that no long file starts near the end with the other worker idle. A file's length is
 *   `test/support/durations.json` for this mode (`npm run test:durations` writes it from the suites' last runs), else
 *   vitest's own record of its last run, else a second.
 * - Two files that start processes of their own (a cluster's runners, `dist/main.js`) not side by side when another
 *   file can go instead: two clusters at once starved their runners (session 28), and in a clean clone, where vitest
 *   has no record of the cluster files, they ran last and together (session 30: the services suite 459 s against
 *   395 s; `cluster/wallet-remote` 56 s against 6 s).
 *
 * The order is worked out by playing the workers forward with the known lengths; the real ones differ, so it is a
 * plan, not a promise: a file still runs exactly once and nothing else changes.
 */
export class SuiteSequencer extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    const recorded = recordedDurations()[modeOfRun()] ?? {}
    const root = this.ctx.config.root
    const planned = files.map((spec) => {
      const file = Path.relative(root, spec.moduleId)
      const last = this.ctx.cache.getFileTestResults(`${spec.project.name}:${file}`)?.duration
      return { spec, file, seconds: recorded[file] ?? (last === undefined ? 1 : last / 1000), heavy: startsProcesses(file) }
    })
    const workers = this.ctx.config.maxWorkers
    const bySpec = new Map(planned.map((p) => [p.file, p.spec] as const))
    return plan(planned, typeof workers === "number" ? workers : 2).map((p) => bySpec.get(p.file)!)
  }
}
