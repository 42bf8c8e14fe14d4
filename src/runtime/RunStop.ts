import * as AiError from "@effect/ai/AiError"
import { Schema } from "effect"
import { type Micros, toNumber } from "../platform/Money.js"
import type { InternalEvent } from "./Events.js"
import { describeFailure } from "./models/Upstream.js"

/**
 * Why a run cannot go on, each a tagged error of its own: the engine fails its body with one of these, and turns it
 * into the `run.failed` event by its tag (`codeOf`), never by what a message says. Anything else that fails a run is
 * an `internal_error` of ours.
 */

/** The expert's model (and every fallback) is not offered by this platform any more. */
export class ModelUnavailable extends Schema.TaggedError<ModelUnavailable>()("ModelUnavailable", {
  message: Schema.String
}) {}

/** This runner no longer holds the session's shard: the turn stops before it bills (issue 33). */
export class OwnerLost extends Schema.TaggedError<OwnerLost>()("OwnerLost", {
  message: Schema.String
}) {}

/** The wallet refused a step's charge for a reason other than funds. */
export class BillingFailed extends Schema.TaggedError<BillingFailed>()("BillingFailed", {
  message: Schema.String
}) {}

/** The final answer does not have the form the caller asked for (structured output). */
export class ModelOutputInvalid extends Schema.TaggedError<ModelOutputInvalid>()("ModelOutputInvalid", {
  message: Schema.String
}) {}

/** The model kept calling tools past `MAX_STEPS`. */
export class StepLimitReached extends Schema.TaggedError<StepLimitReached>()("StepLimitReached", {
  message: Schema.String
}) {}

/** The next step fits neither the run's budget nor the wallet; told as `run.budget_exhausted` first. */
export class BudgetExhausted extends Schema.TaggedError<BudgetExhausted>()("BudgetExhausted", {
  message: Schema.String,
  reason: Schema.Literal("budget", "wallet"),
  budget: Schema.BigIntFromSelf,
  spent: Schema.BigIntFromSelf
}) {}

/** Every provider of the expert's chain rests (breakers, `Retry-After`): a code clients may retry. */
export class UpstreamUnavailable extends Schema.TaggedError<UpstreamUnavailable>()("UpstreamUnavailable", {
  message: Schema.String
}) {}

/** A model call failed; `code` is what `failureOf` made of its `error`, kept for the fallback rule. */
export class ModelCallFailed extends Schema.TaggedError<ModelCallFailed>()("ModelCallFailed", {
  code: Schema.String,
  message: Schema.String,
  error: Schema.Unknown
}) {}

export const RunStop = Schema.Union(
  ModelUnavailable,
  OwnerLost,
  BillingFailed,
  ModelOutputInvalid,
  StepLimitReached,
  BudgetExhausted,
  UpstreamUnavailable,
  ModelCallFailed
)
export type RunStop = typeof RunStop.Type

export const isRunStop = Schema.is(RunStop)

/** The `code` of `run.failed` (docs/events.md) for each stop. */
export const codeOf = (stop: RunStop): string => {
  switch (stop._tag) {
    case "ModelUnavailable":
      return "model_unavailable"
    case "OwnerLost":
      return "owner_lost"
    case "BillingFailed":
      return "billing_failed"
    case "ModelOutputInvalid":
      return "model_output_invalid"
    case "StepLimitReached":
      return "max_steps"
    case "BudgetExhausted":
      return "budget_exhausted"
    case "UpstreamUnavailable":
      return "upstream_unavailable"
    case "ModelCallFailed":
      return stop.code
  }
}

/** What the stream tells before `run.failed`. */
export const eventsBefore = (stop: RunStop): ReadonlyArray<InternalEvent> =>
  stop._tag === "BudgetExhausted"
    ? [{ type: "budget_exhausted", budget: toNumber(stop.budget), spent: toNumber(stop.spent), reason: stop.reason }]
    : []

export const exhausted = (reason: "budget" | "wallet", budget: Micros, spent: Micros, message: string) =>
  new BudgetExhausted({ reason, budget, spent, message })

/** Maps a model failure to the `code` of `run.failed` (docs/events.md). */
export const failureOf = (error: unknown): { code: string; message: string } => {
  if (Schema.is(AiError.AiError)(error)) {
    // The builtin model's failures are the model's own (`/fail`), not an upstream's.
    if (error._tag === "UnknownError" && error.module === "BuiltinModel") {
      return { code: "model_error", message: error.description ?? error.message }
    }
    return describeFailure(error)
  }
  const tagged = error as { _tag?: string; message?: string; description?: string; reason?: string }
  const message = typeof tagged?.message === "string" && tagged.message.length > 0 ? tagged.message : String(error)
  switch (tagged?._tag) {
    case "UpstreamTimeout":
    case "TimeoutException":
      return { code: "upstream_timeout", message }
    case "HttpResponseError":
      return { code: "upstream_error", message }
    case "HttpRequestError":
      return { code: "upstream_unavailable", message }
    case "MalformedOutput":
    case "MalformedInput":
      return { code: "model_output_invalid", message }
    default:
      return { code: "model_error", message }
  }
}

/** A model call's failure as a stop, its error kept for the fallback rule. */
export const modelCallFailed = (error: unknown) => new ModelCallFailed({ ...failureOf(error), error })
