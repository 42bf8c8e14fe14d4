import { Effect, Schema } from "effect"
import { NotFound } from "../Errors.js"

/**
 * Every list answers `{"data": [...], "has_more": bool}` and takes `limit` and `after` (DESIGN.md §6). Lists whose
 * rows are few per account (agents, environments, credentials, ...) are read whole and paged here; the long ones
 * (sessions, a response's input items) page in SQL with the same parameters.
 */
export const ListParams = Schema.Struct({
  /** 1-100; 100 when not given, so a caller that never pages sees what it saw before paging existed. */
  limit: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 100))),
  /** The id of the last item of the previous page. */
  after: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)))
})
export type ListParams = typeof ListParams.Type

export const DEFAULT_LIMIT = 100

/** One page of `items` (in the list's own order); an `after` that is not in the list is a 404, as for sessions. */
export const pageOf = <A>(items: ReadonlyArray<A>, params: ListParams, idOf: (item: A) => string) =>
  Effect.gen(function*() {
    const limit = params.limit ?? DEFAULT_LIMIT
    let start = 0
    if (params.after !== undefined) {
      const index = items.findIndex((item) => idOf(item) === params.after)
      if (index < 0) return yield* new NotFound({ message: `after: ${params.after} is not in this list.` })
      start = index + 1
    }
    return { data: items.slice(start, start + limit), has_more: items.length > start + limit }
  })
