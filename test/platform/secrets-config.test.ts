import { assert, describe, it } from "@effect/vitest"
import { Cause, ConfigProvider, Effect, Exit, Layer, Option, Redacted } from "effect"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import { BillingConfig } from "../../src/billing/Config.js"
import { CredentialsConfig } from "../../src/credentials/Config.js"
import { optionalSecret } from "../../src/platform/Config.js"
import { spawnPlatform } from "../support/Process.js"
import { seedDataDir } from "../support/Templates.js"

/**
 * Issue 29: a key the platform signs, verifies or encrypts with must never be the empty string. `PAYMENT_WEBHOOK_SECRET=`
 * (as an env file writes an unfilled line) used to let anyone sign a "paid" callback with the empty key, and
 * `SECRETS_KEY=` became the AES key sha256(""). Set but empty, such a setting now stops start-up, naming it.
 */

const read = <A, E>(layer: Layer.Layer<A, E>, env: Record<string, string>) =>
  Effect.exit(Layer.build(layer).pipe(Effect.scoped, Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))))

const failureText = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "(succeeded)"

describe("secret settings", () => {
  it.effect("set but empty (or only spaces) is refused with the setting's name; unset is none; a value is kept", () =>
    Effect.gen(function*() {
      for (const value of ["", "   "]) {
        const exit = yield* Effect.exit(optionalSecret("SOME_KEY").pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["SOME_KEY", value]])))))
        assert.isTrue(Exit.isFailure(exit), `SOME_KEY=${JSON.stringify(value)} was accepted`)
        assert.include(failureText(exit), "SOME_KEY is set but empty")
      }
      const unset = yield* optionalSecret("SOME_KEY").pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map())))
      assert.isTrue(Option.isNone(unset))
      const set = yield* optionalSecret("SOME_KEY").pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["SOME_KEY", "k3y"]]))))
      assert.strictEqual(Option.map(set, Redacted.value).pipe(Option.getOrUndefined), "k3y")
    }))

  it.effect("PAYMENT_WEBHOOK_SECRET= and SECRETS_KEY= stop their services from being built", () =>
    Effect.gen(function*() {
      const billing = yield* read(BillingConfig.Default, { PAYMENT_WEBHOOK_SECRET: "" })
      assert.isTrue(Exit.isFailure(billing))
      assert.include(failureText(billing), "PAYMENT_WEBHOOK_SECRET is set but empty")
      const credentials = yield* read(CredentialsConfig.Default, { SECRETS_KEY: "" })
      assert.isTrue(Exit.isFailure(credentials))
      assert.include(failureText(credentials), "SECRETS_KEY is set but empty")
      // Unset, both start (the webhook refuses every callback; credentials use the embedded key file).
      assert.isTrue(Exit.isSuccess(yield* read(BillingConfig.Default, {})))
      assert.isTrue(Exit.isSuccess(yield* read(CredentialsConfig.Default, {})))
    }))

  // What an operator sees: `npm start` with an unfilled line in its env file exits at once and says which.
  for (const name of ["PAYMENT_WEBHOOK_SECRET"]) {
    it.live(`npm start with ${name}= exits non-zero naming it, and never listens`, () =>
      Effect.promise(async () => {
        const dataDir = await Fs.mkdtemp(Path.join(Os.tmpdir(), "atrium-secret-"))
        // Already migrated (a copy of the run's template): the test is about the setting, not a first start.
        await seedDataDir(dataDir)
        try {
          const child = spawnPlatform({ DATA_DIR: dataDir, [name]: "" })
          let output = ""
          child.stdout.on("data", (chunk) => (output += chunk))
          child.stderr.on("data", (chunk) => (output += chunk))
          const code = await new Promise<number | null>((resolve) => child.on("exit", resolve))
          assert.notStrictEqual(code, 0, output)
          assert.include(output, `${name} is set but empty`)
          assert.notInclude(output, "Listening on")
        } finally {
          await Fs.rm(dataDir, { recursive: true, force: true })
        }
      }), { timeout: 120_000 })
  }
})
