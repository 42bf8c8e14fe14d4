import { Cause, Schema } from "effect"

/**
 * Telling an outage from a bug (docs/operations.md, "Fault model"). While PostgreSQL or Redis is unreachable, or an
 * entity's shard is between owners, a request that needs them cannot be served *now*; it is not the caller's fault
 * and not a defect of ours. Such a request answers `503 service_unavailable` with `Retry-After`, never a 500 and never
 * a hang (issue 33). Everything else that fails unexpectedly stays a 500.
 */

/** How long a client waits before trying again (`Retry-After`, seconds): about one shard move or database restart. */
export const RETRY_AFTER_SECONDS = 2

/** An entity message that got no answer within its deadline (`makeEntityCaller`): its owner is unreachable. */
export class EntityDeadline extends Schema.TaggedError<EntityDeadline>()("EntityDeadline", { message: Schema.String }) {}

/**
 * An entity message cut before its answer while its caller was still waiting (`makeEntityCaller`): the shard changed
 * hands mid-call (a runner lost its locks, was cut off, or handed the shard over). Whether it was taken is unknown, as
 * after any cut connection: the caller's retry with its key is answered by the next owner.
 */
export class EntityCut extends Schema.TaggedError<EntityCut>()("EntityCut", { message: Schema.String }) {}

/** The cluster's own failures that mean "no owner to answer right now", and our wallet's retryable failure. */
const UNAVAILABLE_TAGS = new Set([
  "EntityDeadline",
  "EntityCut",
  "WalletFailure",
  "MailboxFull",
  "AlreadyProcessingMessage",
  "PersistenceError",
  "RunnerUnavailable",
  "RunnerNotRegistered",
  "EntityNotAssignedToRunner",
  // A write refused by its fence (Cluster.ts `Fenced`): this runner lost the entity; the next owner answers a retry.
  "Fenced"
])

/** PostgreSQL's classes of errors that say the server is going or gone (08: connection, 57P: operator intervention). */
const PG_OUTAGE_CODE = /^(08|57P|53300)/

/** Node's and the drivers' words for a connection that is not there. */
const CONNECTION_WORDS =
  /ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|Connection terminated|connection error|Connection is closed|isn't writeable|MaxRetriesPerRequest|timeout exceeded when trying to connect|the database system is (starting up|shutting down)|terminating connection|Client was closed/i

const looksUnavailable = (error: unknown, depth = 0): boolean => {
  if (error === null || typeof error !== "object" || depth > 6) return false
  const e = error as { _tag?: unknown; name?: unknown; code?: unknown; message?: unknown; cause?: unknown; error?: unknown }
  if (typeof e._tag === "string" && UNAVAILABLE_TAGS.has(e._tag)) return true
  // A defect that crossed runners keeps its name, not its tag.
  if (e.name === "Fenced") return true
  if (typeof e.code === "string" && (PG_OUTAGE_CODE.test(e.code) || CONNECTION_WORDS.test(e.code))) return true
  if (typeof e.message === "string" && CONNECTION_WORDS.test(e.message)) return true
  return looksUnavailable(e.cause, depth + 1) || looksUnavailable(e.error, depth + 1)
}

/** Whether `cause` failed because a service it needs is unreachable right now (an outage), not because of a bug. */
export const isOutage = (cause: Cause.Cause<unknown>): boolean => {
  const errors = [...Cause.failures(cause), ...Cause.defects(cause)]
  return errors.length > 0 && errors.some((error) => looksUnavailable(error))
}
