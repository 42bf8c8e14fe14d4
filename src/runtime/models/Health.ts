import * as AiError from "@effect/ai/AiError"
import { Clock, Duration, Effect, Option } from "effect"
import { findCause, UpstreamTimeout } from "./Upstream.js"

/**
 * Provider health (docs/models.md, "Fallbacks and the circuit breaker"): which upstream failures move a run to its
 * next fallback model, and a circuit breaker per provider that stops sending requests to one that keeps failing.
 *
 * Breaker, per provider id, on the `Clock` (so tests drive it with `TestClock`):
 * - closed: requests go through; `FAILURE_THRESHOLD` retryable failures in a row open it;
 * - open: the provider is skipped for `OPEN_FOR`;
 * - half-open: after that, one request (the probe) goes through; its success closes the breaker, its failure opens
 *   it again for `OPEN_FOR`. A probe that never reports (its run was cancelled) is given up after `OPEN_FOR`.
 * A `Retry-After` (429 or 503) rests the provider until then, whatever the breaker says, capped at `MAX_REST`.
 */

export const FAILURE_THRESHOLD = 3
export const OPEN_FOR = Duration.seconds(30)
export const MAX_REST = Duration.minutes(5)

/** A failure another model may succeed at: rate limits, server errors, lost connections, stalls, cut streams. */
export interface Retryable {
  /** From the upstream's `Retry-After`, when it sent one. */
  readonly retryAfter: Option.Option<Duration.Duration>
}

/** `Retry-After` as seconds or an HTTP date, relative to `now`; capped at `MAX_REST`. */
export const parseRetryAfter = (value: string | undefined, now: number): Option.Option<Duration.Duration> => {
  if (value === undefined) return Option.none()
  const text = value.trim()
  const millis = /^\d+(\.\d+)?$/.test(text) ? Number(text) * 1000 : Date.parse(text) - now
  if (!Number.isFinite(millis) || millis < 0) return Option.none()
  return Option.some(Duration.min(Duration.millis(Math.ceil(millis)), MAX_REST))
}

/**
 * Whether a model call's failure is one to fall back from. Not retryable: the model's own output or a prompt the
 * upstream refuses (4xx other than 408/429), and the builtin model's failures, which are deliberate.
 */
export const retryable = (error: unknown, now: number): Option.Option<Retryable> => {
  if (!AiError.isAiError(error)) return Option.none()
  const none = Option.none<Duration.Duration>()
  switch (error._tag) {
    case "HttpResponseError": {
      const status = error.response.status
      // A body that broke while being read (a library's stream cut mid-way) is a lost connection.
      if (error.reason !== "StatusCode") return Option.some({ retryAfter: Option.none() })
      if (status !== 429 && status !== 408 && status < 500) return Option.none()
      return Option.some({ retryAfter: parseRetryAfter(error.response.headers["retry-after"], now) })
    }
    case "HttpRequestError":
      return Option.some({ retryAfter: none })
    case "UnknownError": {
      if (error.module === "BuiltinModel") return Option.none()
      const timeout = findCause(error, (u): u is UpstreamTimeout => u instanceof UpstreamTimeout)
      // The overall request timeout is the run's own limit, not the upstream's health.
      if (timeout !== undefined) return timeout.phase === "idle" ? Option.some({ retryAfter: none }) : Option.none()
      // A cut stream, a reset, an error event mid-stream (Anthropic's `overloaded_error`).
      return Option.some({ retryAfter: none })
    }
    default:
      return Option.none()
  }
}

interface Breaker {
  failures: number
  openUntil: number | null
  probeSince: number | null
  restUntil: number
}

export type BreakerState = "closed" | "open" | "half_open"

export class ProviderHealth extends Effect.Service<ProviderHealth>()("atrium/runtime/models/ProviderHealth", {
  // Built per layer (not a module-level value): each platform, and each test, starts with every breaker closed.
  effect: Effect.sync(() => {
    const breakers = new Map<string, Breaker>()
    const of = (provider: string): Breaker => {
      let breaker = breakers.get(provider)
      if (breaker === undefined) {
        breaker = { failures: 0, openUntil: null, probeSince: null, restUntil: 0 }
        breakers.set(provider, breaker)
      }
      return breaker
    }
    const openFor = Duration.toMillis(OPEN_FOR)

    /** Whether a request may go to `provider` now; taking the half-open probe when it is due. */
    const admit = (provider: string) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const breaker = of(provider)
        if (now < breaker.restUntil) return false
        if (breaker.openUntil === null) return true
        if (now < breaker.openUntil) return false
        if (breaker.probeSince !== null && now < breaker.probeSince + openFor) return false
        breaker.probeSince = now
        return true
      })

    /** Milliseconds until `provider` may be tried again (0: now). */
    const waitFor = (provider: string) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const breaker = of(provider)
        return Math.max(0, breaker.restUntil - now, (breaker.openUntil ?? 0) - now)
      })

    const succeeded = (provider: string) =>
      Effect.sync(() => {
        const breaker = of(provider)
        breaker.failures = 0
        breaker.openUntil = null
        breaker.probeSince = null
      })

    const failed = (provider: string, retryAfter: Option.Option<Duration.Duration>) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const breaker = of(provider)
        breaker.failures++
        if (Option.isSome(retryAfter)) {
          breaker.restUntil = Math.max(breaker.restUntil, now + Duration.toMillis(retryAfter.value))
        }
        const probing = breaker.probeSince !== null
        if (probing || breaker.failures >= FAILURE_THRESHOLD) {
          breaker.openUntil = now + openFor
          breaker.probeSince = null
        }
      })

    /**
     * A call that ended in a way that says nothing of the provider's health (the upstream refused the request
     * itself, a 4xx): it does not count. Were it the half-open probe, the probe is given back, so the next request
     * probes at once rather than the breaker staying shut for another `OPEN_FOR` (issue 44 gap 1).
     */
    const released = (provider: string) =>
      Effect.sync(() => {
        of(provider).probeSince = null
      })

    const state = (provider: string) =>
      Effect.map(Clock.currentTimeMillis, (now): BreakerState => {
        const breaker = of(provider)
        if (breaker.openUntil === null) return "closed"
        return now < breaker.openUntil ? "open" : "half_open"
      })

    return { admit, waitFor, succeeded, failed, released, state } as const
  })
}) {}
