import { Effect, ParseResult, Schema } from "effect"

/**
 * Row schemas for the repositories: a query's rows are decoded (`SqlSchema`), never cast, and a row that does not
 * match its schema is a defect at the repository's edge (like an SQL error). Columns are camelCase here
 * (`Database.ts` transforms the names); timestamps arrive as `Date` from both drivers, `bigint`/`numeric` columns are
 * selected `::text` and decoded with `Schema.BigInt` (credits) or `Schema.NumberFromString` (counts, sizes).
 */

/** A jsonb column: node-postgres hands over the value, PGlite sometimes its text. */
export const Json = <A, I>(schema: Schema.Schema<A, I>) => Schema.Union(schema, Schema.parseJson(schema))

/**
 * A row that does not match its schema as a defect, for the few queries whose SQL errors stay failures (the caller
 * retries or settles them: the wallet committer, the cluster's watch).
 */
export const rowDefects = <A, E, R>(
  effect: Effect.Effect<A, E | ParseResult.ParseError, R>
): Effect.Effect<A, Exclude<E, ParseResult.ParseError>, R> => Effect.catchIf(effect, ParseResult.isParseError, Effect.die)
