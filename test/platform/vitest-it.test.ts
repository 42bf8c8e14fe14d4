import { assert, describe, effect, it, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { plan, recordedDurations, startsProcesses } from "../support/Durations.js"
import { restoreIt } from "../support/setupFile.js"

/**
 * The suites run many files per worker in one module graph, and `@effect/vitest`'s `layer(...)` leaves its block's
 * methods on vitest's one global `it`: the next file's `it.layer(X)` then built the previous file's layer again
 * under X (test/support/setupFile.ts). Each file starts from `it` as the library made it.
 */
const SETUP = `setupFiles: ["test/support/setupFile.ts"]`
/** A config's text (importing vitest.config.ts would read the run's mode, which this unit file does not). */
const configText = (name: string) => Fs.readFileSync(Path.resolve(import.meta.dirname, "../..", name), "utf8")
const pristine = () => ({ layer: it.layer === layer, effect: it.effect === effect })
/** When this file was collected, after whatever ran before it in this worker. */
const atStart = pristine()

describe("vitest's shared it, between files (test/support/setupFile.ts)", () => {
  layer(Layer.empty)((inner) => {
    inner.effect("a block like every suite's", () => Effect.void)
  })
  const afterBlock = pristine()
  restoreIt()
  const restored = pristine()

  it("a layer block leaves its methods on the global it, and restoreIt puts the library's back", () => {
    // If a release of @effect/vitest stops mutating the global (Effect 4's did), the first check says the guard can go.
    assert.deepStrictEqual(afterBlock, { layer: false, effect: false })
    assert.deepStrictEqual(restored, { layer: true, effect: true })
  })

  it("both suites' configs restore it before each file, and this file started with it restored", () => {
    assert.include(configText("vitest.config.ts"), SETUP)
    assert.include(configText("vitest.browser.config.ts"), SETUP)
    assert.deepStrictEqual(atStart, { layer: true, effect: true })
  })
})

describe("the suites' order (test/support/Sequencer.ts)", () => {
  const file = (name: string, seconds: number, heavy = false) => ({ file: name, seconds, heavy })

  it("longest first, and a file that starts processes waits while another such file runs and a light one can go", () => {
    const order = plan([file("light-1", 1), file("cluster-a", 30, true), file("light-2", 20), file("cluster-b", 25, true), file("light-3", 5)], 2)
    // One worker takes cluster-a (30 s); the other, beside it, takes the light files (longest first) until none is
    // left, and only then cluster-b (at 26 s, the one plan that does not leave it waiting for an idle worker).
    assert.deepStrictEqual(order.map((f) => f.file), ["cluster-a", "light-2", "light-3", "light-1", "cluster-b"])
  })

  it("the recorded lengths name files that exist, and the cluster files are known to start processes", () => {
    const recorded = recordedDurations()
    for (const [mode, files] of Object.entries(recorded)) {
      assert.isAbove(Object.keys(files).length, 50, mode)
    }
    assert.isTrue(startsProcesses("test/cluster/holds.test.ts"))
    assert.isTrue(startsProcesses("test/main.test.ts"))
    assert.isTrue(startsProcesses("test/billing/crash.test.ts"))
    assert.isTrue(startsProcesses("test/runtime/sandbox.test.ts"))
    assert.isFalse(startsProcesses("test/billing/wallet.test.ts"))
  })
})
