import { Effect, Layer } from "effect"
import { KnowledgeSearch, KnowledgeUnavailable } from "../runtime/Ports.js"
import { Knowledge } from "./Knowledge.js"

/** The run engine's `file_search` port (src/runtime/Ports.ts), on knowledge's own search. */
export const KnowledgeSearchLive = Layer.effect(
  KnowledgeSearch,
  Effect.map(Knowledge, (knowledge) =>
    KnowledgeSearch.of({
      search: (owner, storeIds, query, maxResults, payer) =>
        knowledge.searchStores(owner, storeIds, { query, maxResults }, payer).pipe(
          Effect.map((found) =>
            found.passages.map((passage) => ({
              storeId: passage.storeId,
              fileId: passage.fileId,
              filename: passage.filename,
              chunkIndex: passage.seq,
              startChar: passage.startChar,
              endChar: passage.endChar,
              heading: passage.heading,
              score: Math.round(passage.fusedScore * 1e6) / 1e6,
              text: passage.text
            }))
          ),
          Effect.catchTag("NotFound", (error) =>
            Effect.fail(new KnowledgeUnavailable({ message: `${error.message} The knowledge base was deleted or is not yours.` })))
        )
    }))
).pipe(Layer.provide(Knowledge.Default))
