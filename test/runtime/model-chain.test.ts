import * as AiError from "@effect/ai/AiError"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Stream, TestClock, TestContext } from "effect"
import { ModelChain } from "../../src/runtime/ModelChain.js"
import type { InternalEvent } from "../../src/runtime/Events.js"
import { FAILURE_THRESHOLD, OPEN_FOR, ProviderHealth } from "../../src/runtime/models/Health.js"
import type { ResolvedModel } from "../../src/runtime/models/Models.js"
import { requestDetails } from "../../src/runtime/models/Upstream.js"

/**
 * Issue 44 gaps 1 and 9, on the model chain itself (the breaker's clock is `TestClock`): an upstream's 4xx refusal is
 * final and does not count in the breaker, not even as the half-open probe; a model skipped because its provider's
 * breaker is open is told as `run.model_fallback` with its reason.
 */

const Chain = ModelChain.DefaultWithoutDependencies.pipe(
  Layer.provideMerge(ProviderHealth.Default),
  Layer.merge(TestContext.TestContext)
)

const refused = (status: number) =>
  new AiError.HttpResponseError({
    module: "Anthropic",
    method: "streamText",
    reason: "StatusCode",
    request: requestDetails("http://upstream.test/v1/messages"),
    response: { status, headers: {} },
    description: `the model upstream returned ${status}: prompt is too long`
  })

/** A model of `provider` that answers "ok" or fails with `error`. */
const modelOf = (provider: string, error?: unknown): ResolvedModel => ({
  entry: {
    id: `${provider}/m`,
    provider,
    kind: "anthropic",
    model: "m",
    description: "",
    contextWindow: 1000,
    inputPer1k: "1",
    outputPer1k: "1",
    cachedInputPer1k: "1",
    capabilities: []
  },
  model: {
    streamText: () =>
      error === undefined
        ? Stream.fromIterable([
          { type: "text-delta", id: "t", delta: "ok" },
          { type: "finish", reason: "stop", usage: { inputTokens: 3, outputTokens: 1, totalTokens: 4 } }
        ])
        : Stream.fail(error)
  } as any
})

const openBreaker = (provider: string) =>
  Effect.gen(function*() {
    const health = yield* ProviderHealth
    for (let i = 0; i < FAILURE_THRESHOLD; i++) yield* health.failed(provider, Option.none())
  })

describe("the model chain", () => {
  it.effect("an upstream 400 is final (upstream_rejected) and gives the half-open probe back", () =>
    Effect.gen(function*() {
      const chain = yield* ModelChain
      const health = yield* ProviderHealth
      yield* openBreaker("anthropic")
      yield* TestClock.adjust(OPEN_FOR)
      assert.strictEqual(yield* health.state("anthropic"), "half_open")
      const events: Array<InternalEvent> = []
      const failure = yield* Effect.flip(
        chain.call([modelOf("anthropic", refused(400)), modelOf("openai")], [], undefined, (e) => Effect.sync(() => void events.push(e)))
      )
      assert.strictEqual(failure._tag, "ModelCallFailed")
      assert.strictEqual((failure as any).code, "upstream_rejected")
      assert.deepStrictEqual(events, [], "a refusal moves to no fallback: the next model would be asked the same")
      // The 400 was the probe: it counts neither way, and the next request may probe at once.
      assert.strictEqual(yield* health.state("anthropic"), "half_open")
      assert.isTrue(yield* health.admit("anthropic"), "the probe was given back")
    }).pipe(Effect.provide(Chain)))

  it.effect("a model skipped because its provider's breaker is open is told as run.model_fallback, with the reason", () =>
    Effect.gen(function*() {
      const chain = yield* ModelChain
      yield* openBreaker("anthropic")
      const events: Array<InternalEvent> = []
      const answered = yield* chain.call(
        [modelOf("anthropic"), modelOf("gemini", refused(503)), modelOf("openai")],
        [],
        undefined,
        (e) => Effect.sync(() => void events.push(e))
      )
      assert.strictEqual(answered.model.entry.id, "openai/m")
      const fallbacks = events.filter((e) => e.type === "model_fallback")
      assert.deepStrictEqual(fallbacks.map((e: any) => [e.from, e.to, e.reason, e.code]), [
        ["anthropic/m", "gemini/m", "breaker_open", "upstream_unavailable"],
        ["gemini/m", "openai/m", "failed", "upstream_error"]
      ])
      assert.include((fallbacks[0] as any).message, "circuit breaker")
      assert.isAbove((fallbacks[0] as any).retry_after_ms, 0)
    }).pipe(Effect.provide(Chain)))
})
