import { assert, describe, it } from "@effect/vitest"
import { Cause, Data, Duration } from "effect"
import { UpstreamTimeout } from "../../src/runtime/models/Upstream.js"
import {
  BillingFailed,
  codeOf,
  eventsBefore,
  exhausted,
  failureOf,
  isRunStop,
  modelCallFailed,
  ModelOutputInvalid,
  ModelUnavailable,
  OwnerLost,
  StepLimitReached,
  UpstreamUnavailable
} from "../../src/runtime/RunStop.js"

/** A model call's failure becomes the `code` of `run.failed` by its tag, never by what its message happens to say. */

class HttpRequestError extends Data.TaggedError("HttpRequestError")<{ readonly message: string }> {}
class Odd extends Data.TaggedError("Odd")<{ readonly message: string }> {}

describe("run failure codes", () => {
  it("timeouts by their tag", () => {
    assert.strictEqual(failureOf(new UpstreamTimeout({ phase: "idle", after: Duration.seconds(5) })).code, "upstream_timeout")
    assert.strictEqual(failureOf(new Cause.TimeoutException("slow")).code, "upstream_timeout")
  })

  it("a message that mentions a timeout does not make one", () => {
    assert.strictEqual(failureOf(new HttpRequestError({ message: "connection timed out" })).code, "upstream_unavailable")
    assert.strictEqual(failureOf(new Odd({ message: "the stream stalled while idle" })).code, "model_error")
  })
})

describe("run stops", () => {
  it("each stop's code comes from its tag, and only a spent budget is told before run.failed", () => {
    const stops = [
      [new ModelUnavailable({ message: "m" }), "model_unavailable"],
      [new OwnerLost({ message: "m" }), "owner_lost"],
      [new BillingFailed({ message: "m" }), "billing_failed"],
      [new ModelOutputInvalid({ message: "m" }), "model_output_invalid"],
      [new StepLimitReached({ message: "m" }), "max_steps"],
      [new UpstreamUnavailable({ message: "m" }), "upstream_unavailable"],
      [modelCallFailed(new UpstreamTimeout({ phase: "idle", after: Duration.seconds(5) })), "upstream_timeout"],
      [exhausted("wallet", 1_500_000n, 500_000n, "m"), "budget_exhausted"]
    ] as const
    for (const [stop, code] of stops) {
      assert.isTrue(isRunStop(stop))
      assert.strictEqual(codeOf(stop), code)
      assert.deepStrictEqual(
        eventsBefore(stop),
        stop._tag === "BudgetExhausted" ? [{ type: "budget_exhausted", budget: 1.5, spent: 0.5, reason: "wallet" }] : []
      )
    }
    // Any other failure is not a stop: the engine reports it as internal_error.
    assert.isFalse(isRunStop(new Odd({ message: "m" })))
  })
})
