import * as Fs from "node:fs"
import * as Path from "node:path"
import { EMBEDDED_ONLY, SERVICES_ONLY } from "./Suites.js"

/*
 * The lengths of the suites' files and the order they are run in (`Sequencer.ts`; no vitest import, so a unit test
 * can read it).
 */
const DURATIONS = Path.join(import.meta.dirname, "durations.json")

export type Mode = "embedded" | "services"

/** Seconds per file and mode, as `npm run test:durations` wrote them. */
export const recordedDurations = (): Record<Mode, Record<string, number>> =>
  Fs.existsSync(DURATIONS) ? JSON.parse(Fs.readFileSync(DURATIONS, "utf8")) : { embedded: {}, services: {} }

const ROOT = Path.resolve(import.meta.dirname, "../..")
/** Starts `dist/main.js` (test/support/Process.ts), in either mode. */
const LAUNCHES = /from "(?:\.\.?\/)+(?:support\/Process|cluster\/support)\.js"/

/**
 * Whether a file starts processes of its own: runners of a cluster, the compiled platform, or the sandbox's guests
 * (Pyodide, a CPU-second each to load; two of these files side by side ran 43 s against 27 s, session 30).
 */
export const startsProcesses = (file: string) => {
  if (file in SERVICES_ONLY || EMBEDDED_ONLY[file] === "process" || /sandbox/.test(file)) return true
  const path = Path.join(ROOT, file)
  return Fs.existsSync(path) && LAUNCHES.test(Fs.readFileSync(path, "utf8"))
}

export interface Planned {
  readonly file: string
  readonly seconds: number
  readonly heavy: boolean
}

/** The order of `files` for `workers` workers: longest first, heavy files apart where another can go instead. */
export const plan = (files: ReadonlyArray<Planned>, workers: number): Array<Planned> => {
  const left = [...files].sort((a, b) => b.seconds - a.seconds || a.file.localeCompare(b.file))
  const running = Array.from({ length: Math.max(workers, 1) }, () => ({ until: 0, heavy: false }))
  const order: Array<Planned> = []
  while (left.length > 0) {
    const worker = running.reduce((first, w) => w.until < first.until ? w : first)
    const heavyBeside = running.some((w) => w !== worker && w.heavy && w.until > worker.until)
    const at = heavyBeside ? Math.max(left.findIndex((file) => !file.heavy), 0) : 0
    const [next] = left.splice(at, 1)
    order.push(next!)
    worker.until += next!.seconds
    worker.heavy = next!.heavy
  }
  return order
}
