import { Context, Effect, Option } from "effect"
import type { NotFound } from "./Errors.js"

/**
 * Who may do what (issue 49, after Effect-TS/examples' `Domain/Policy.ts`). Each domain's rules live in its own
 * `Policy.ts`, so a reader finds every rule of a domain in one file; the filters a repository applies in SQL (the
 * partition: owner and end user) are named there too, as the function that builds what the repository filters by.
 *
 * Where we differ from the examples:
 * - A refusal is the domain's `NotFound`, with the message a missing thing gets: a denied caller cannot tell another
 *   account's row from no row (spec 2.7). So there is no `Unauthorized` here and no status of its own.
 * - The caller is a parameter of our operations (`CallerIdentity`, a `Partition`), not a service the rule reads, so a
 *   rule is a plain function of the caller and the thing; `policy` lifts a check into a permit.
 * - Most rules need the row they judge, which the operation reads itself: those operations use `allowed` (the row,
 *   or "not found") and need no permit. The phantom permit (`policyRequire` / `policyUse`) is for an operation that
 *   is handed a thing another layer found, where forgetting the rule would compile otherwise.
 */

/** The proof that rule `Rule` held: an operation that requires it cannot run unless `policyUse` granted it. */
export interface Permit<Rule extends string> {
  readonly rule: Rule
}

/** The context key of `rule`'s permit (keys, not tag objects, identify a service, so one per rule). */
export const Permit = <Rule extends string>(rule: Rule): Context.Tag<Permit<Rule>, Permit<Rule>> =>
  Context.GenericTag<Permit<Rule>>(`atrium/platform/Policy/${rule}`)

/** A rule as an effect: its permit when `check` holds, else `denied()` (the "not found" of what was asked for). */
export const policy = <Rule extends string, E, R>(
  rule: Rule,
  check: Effect.Effect<boolean, E, R>,
  denied: () => NotFound
): Effect.Effect<Permit<Rule>, E | NotFound, R> =>
  Effect.flatMap(check, (allowed) => (allowed ? Effect.succeed<Permit<Rule>>({ rule }) : Effect.fail(denied())))

/** Runs `effect` once `policy` granted its permit, which `effect` may require. */
export const policyUse = <Rule extends string, E, R>(policy: Effect.Effect<Permit<Rule>, E, R>) =>
<A, E2, R2>(effect: Effect.Effect<A, E2, R2>): Effect.Effect<A, E | E2, R | Exclude<R2, Permit<Rule>>> =>
  Effect.flatMap(policy, (permit) => Effect.provideService(effect, Permit(permit.rule), permit))

/** Marks `effect` as needing `rule`: the compiler refuses a call that no `policyUse` (or `withSystemActor`) wraps. */
export const policyRequire = <Rule extends string>(rule: Rule) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R | Permit<Rule>> => Effect.zipRight(Permit(rule), effect)

/** The platform acting for itself (a workflow, a schedule's fire): no caller to judge, the rule is granted. */
export const withSystemActor = <Rule extends string>(rule: Rule) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, Exclude<R, Permit<Rule>>> =>
  Effect.provideService(effect, Permit(rule), { rule })

/** The row a rule lets the caller reach, else `denied()`: a missing row and a refused one answer alike. */
export const allowed = <A>(found: Option.Option<A>, rule: (row: A) => boolean, denied: () => NotFound): Effect.Effect<A, NotFound> =>
  Option.isSome(found) && rule(found.value) ? Effect.succeed(found.value) : Effect.fail(denied())
