import { assert, describe, it } from "@effect/vitest"
import { Cause, Data, Duration } from "effect"
import { UpstreamTimeout } from "../../src/runtime/models/Upstream.js"
import { failureOf } from "../../src/runtime/RunEngine.js"

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
