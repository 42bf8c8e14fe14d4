import { it } from "@effect/vitest"

/**
 * Before every test file: vitest's `it` as `@effect/vitest` made it, whatever the previous file did to it.
 *
 * `@effect/vitest` 0.30 (the Effect 3 line's last) hands a `layer(...)` block its tests' `it` by assigning the block's
 * `effect`, `scoped`, `prop`, `flakyTest` and `layer` onto vitest's one global `it` (`makeIt`), and never puts them
 * back. The suites run many files per worker in one module graph (`isolate: false`, vitest.config.ts), so the next
 * file's `it.layer(X)` was the previous block's nested `layer`: it built X on top of the previous file's whole layer,
 * which was built again, and so on down the worker's files. Measured (session 30): the n-th file of a worker started
 * n platforms, and a one-test file took 1.6 s first and 13 s as the fifteenth. Effect 4's `@effect/vitest` stops
 * mutating the global (Effect-TS/effect-smol#2177); until then this puts the methods back, and
 * `test/platform/vitest-it.test.ts` checks that both configs run it and that it restores `it`.
 */
const KEY = Symbol.for("atrium/test/pristineIt")
const METHODS = ["effect", "scoped", "live", "scopedLive", "prop", "flakyTest", "layer"] as const

type Pristine = Pick<typeof it, (typeof METHODS)[number]>
const store = globalThis as unknown as Record<symbol, Pristine | undefined>

/** Puts `it`'s methods back as they were before the worker's first `layer(...)` (kept on `globalThis`, which the
 * worker's files share: this module may be evaluated again for each file). */
export const restoreIt = () => {
  const pristine = store[KEY] ??= Object.fromEntries(METHODS.map((name) => [name, it[name]])) as unknown as Pristine
  Object.assign(it, pristine)
}

restoreIt()
