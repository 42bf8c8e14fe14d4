import { newId } from "../platform/Ids.js"
import { CITATION_MARKER } from "../runtime/tools/FileSearch.js"
import type { ResponsePayload } from "./Api.js"

/**
 * OpenAI's `file_search` tool on `/v1/responses` (docs/knowledge.md): the request's `file_search` tools name the
 * caller's vector stores; the run's `file_search` calls become `file_search_call` output items, and the citation
 * markers the answer writes become `file_citation` annotations of its text.
 */

type Tool = NonNullable<ResponsePayload["tools"]>[number]

/** The stores and result count of the request's `file_search` tools (several are merged); none without one. */
export const fileSearchOf = (tools: ReadonlyArray<Tool>) => {
  const searches = tools.filter((tool) => tool.type === "file_search")
  if (searches.length === 0) return undefined
  return {
    storeIds: [...new Set(searches.flatMap((tool) => tool.vector_store_ids ?? []))],
    maxResults: Math.min(...searches.map((tool) => tool.max_num_results ?? 10))
  }
}

export interface Cited {
  readonly file_id: string
  readonly filename: string
}

/** `file_citation` annotations for the markers in `text` whose passage a search of this response returned. */
export const annotationsOf = (text: string, cited: ReadonlyMap<string, Cited>) => {
  const annotations: Array<{ type: "file_citation"; index: number; file_id: string; filename: string }> = []
  for (const match of text.matchAll(CITATION_MARKER)) {
    const found = cited.get(match[0])
    if (found !== undefined) annotations.push({ type: "file_citation", index: match.index!, file_id: found.file_id, filename: found.filename })
  }
  return annotations
}

export const searchCallItem = (id = newId("fs")) => ({
  id,
  type: "file_search_call" as const,
  status: "in_progress" as string,
  queries: [] as Array<string>,
  results: null as Array<unknown> | null
})
export type SearchCallItem = ReturnType<typeof searchCallItem>

/** Completes a search item from the tool's output; returns the citations it offered, by marker. */
export const completeSearch = (item: SearchCallItem, output: unknown, includeResults: boolean) => {
  const found = output as { query?: unknown; results?: Array<Record<string, any>> } | null
  const results = Array.isArray(found?.results) ? found.results : []
  item.status = "completed"
  item.queries = typeof found?.query === "string" ? [found.query] : []
  item.results = includeResults
    ? results.map((result) => ({
      file_id: result.file_id,
      filename: result.filename,
      score: result.score,
      text: result.text,
      attributes: {},
      vector_store_id: result.vector_store_id,
      chunk_index: result.chunk_index,
      start_char: result.start_char,
      end_char: result.end_char
    }))
    : null
  return new Map<string, Cited>(results.map((result) => [String(result.marker), { file_id: result.file_id, filename: result.filename }]))
}
