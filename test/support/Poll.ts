import { Effect } from "effect"

/**
 * The suite's one way to wait for what the platform does on its own time (a background run reaching a state, a
 * webhook delivered, a listener let go): read, and read again `every` ms apart until `done` holds, for at most
 * `within` ms. A poll ends as soon as the state is reached, so it costs what the platform takes, not a guess; a fixed
 * wait (`realWait`) costs its whole length every run and is kept only where no state can be read.
 *
 * Real time, not the `TestClock`: what is awaited happens in another process or on the server's own clock. The pause
 * is a `setTimeout`, so the poll works under `it.effect`'s test clock as well as a live one.
 */
export const pollUntil = <A, E, R>(
  read: Effect.Effect<A, E, R>,
  done: (value: A) => boolean,
  what: string,
  options: { readonly every?: number; readonly within?: number } = {}
): Effect.Effect<A, E, R> =>
  Effect.gen(function*() {
    const every = options.every ?? 100
    const deadline = Date.now() + (options.within ?? 30_000)
    while (true) {
      const value = yield* read
      if (done(value)) return value
      if (Date.now() > deadline) {
        // A defect, not vitest's `assert`: the benches load this module (through Process.ts) outside vitest.
        return yield* Effect.die(new Error(`${what}: not reached within ${options.within ?? 30_000} ms (last seen: ${lastSeen(value)})`))
      }
      yield* pause(every)
    }
  })

/**
 * A fixed wait on the real clock, for the few places where nothing can be read to say the moment has come (a
 * server-side timer that must expire, a window in which something must NOT happen). Each call says why at its site;
 * `test/platform/source-rules.test.ts` counts them.
 */
export const realWait = (millis: number) => pause(millis)

/**
 * `pollUntil` for code outside Effect (a process's output read in a Promise, a driver of real processes): reads until
 * `done` holds, `every` ms apart, for at most `within` ms, and rejects naming what was awaited and what was seen last.
 */
export const pollPromise = async <A>(
  read: () => Promise<A> | A,
  done: (value: A) => boolean,
  what: string,
  options: { readonly every?: number; readonly within?: number } = {}
): Promise<A> => {
  const every = options.every ?? 100
  const deadline = Date.now() + (options.within ?? 30_000)
  while (true) {
    const value = await read()
    if (done(value)) return value
    if (Date.now() > deadline) {
      throw new Error(`${what}: not reached within ${options.within ?? 30_000} ms (last seen: ${lastSeen(value)})`)
    }
    await sleep(every)
  }
}

const sleep = (millis: number) => new Promise<void>((resolve) => setTimeout(resolve, millis))
const pause = (millis: number) => Effect.promise(() => sleep(millis))

const lastSeen = (value: unknown) => {
  try {
    return (JSON.stringify(value) ?? String(value)).slice(0, 500)
  } catch {
    return String(value)
  }
}
