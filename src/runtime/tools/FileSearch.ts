import type { UserId } from "../../platform/Ids.js"
import { Effect, Either, ParseResult, Schema } from "effect"
import { type KnowledgePassage, KnowledgeSearch } from "../Ports.js"
import { ToolFailure, type ToolContext } from "./Tools.js"

/**
 * The `file_search` tool (docs/knowledge.md): an expert with knowledge bases, or a `/v1/responses` call with a
 * `file_search` tool, searches them. Each passage comes back with its citation (file, chunk, character range) and a
 * marker, `【n†filename】`, numbered through the run: an answer that writes a marker cites that passage, and the
 * Responses API turns the markers it finds into `file_citation` annotations.
 */

export const FILE_SEARCH = "file_search"

export const FILE_SEARCH_DESCRIPTION =
  "Searches the knowledge base (the documents you were given) and returns the most relevant passages, each with a " +
  "citation marker such as 【1†manual.md】. Answer from the passages, and cite each one you use by writing its marker " +
  "right after the sentence it supports."

export const FileSearchParameters = Schema.Struct({
  query: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(4000)).annotations({ description: "what to look for" }),
  max_num_results: Schema.optional(Schema.Int.pipe(Schema.between(1, 50))).annotations({ description: "at most this many passages" })
})

/** What a passage's marker looks like; `Responses` reads markers back with `CITATION_MARKER`. */
export const citationMarker = (n: number, filename: string) => `【${n}†${filename.replace(/[【】]/g, "")}】`
export const CITATION_MARKER = /【(\d+)†([^】]*)】/g

export const citationOf = (passage: KnowledgePassage, n: number) => ({
  marker: citationMarker(n, passage.filename),
  file_id: passage.fileId,
  filename: passage.filename,
  vector_store_id: passage.storeId,
  chunk_index: passage.chunkIndex,
  start_char: passage.startChar,
  end_char: passage.endChar,
  score: passage.score,
  text: passage.text
})

/** Runs `file_search` over the run's knowledge; fails as a tool call (the model is told) when it cannot. */
export const runFileSearch = (params: unknown, context: ToolContext, payer: UserId) =>
  Effect.gen(function*() {
    const knowledge = context.knowledge
    if (knowledge === undefined) return yield* new ToolFailure({ message: "This run has no knowledge to search." })
    const decoded = Schema.decodeUnknownEither(FileSearchParameters)(params, { onExcessProperty: "ignore" })
    if (Either.isLeft(decoded)) {
      const detail = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)
        .map((issue) => `${issue.path.length > 0 ? issue.path.join(".") : "arguments"}: ${issue.message}`).join("; ")
      return yield* new ToolFailure({ message: `Invalid arguments for file_search: ${detail}` })
    }
    const search = yield* KnowledgeSearch
    const passages = yield* search.search(
      knowledge.owner,
      knowledge.storeIds,
      decoded.right.query,
      Math.min(decoded.right.max_num_results ?? knowledge.maxResults, knowledge.maxResults),
      payer
    ).pipe(Effect.mapError((error) => new ToolFailure({ message: error.message, code: "knowledge_unavailable" })))
    return {
      query: decoded.right.query,
      results: passages.map((passage) => citationOf(passage, ++knowledge.citations.next))
    }
  })
