import { Effect, Option } from "effect"
import { chargedToSpan } from "../runtime/Tracing.js"
import { addEmbeddings } from "../platform/migrations/0016_knowledge.js"
import type { FileId } from "../files/Domain.js"
import { newId, type UserId } from "../platform/Ids.js"
import { KnowledgeConfig } from "./Config.js"
import { embed, vectorLiteral } from "./Embeddings.js"
import { type Candidate, type Filter, SearchRepo } from "./SearchRepo.js"
import { Wallets } from "../billing/Wallets.js"

/**
 * Hybrid retrieval (docs/knowledge.md): the full-text candidates (`ts_rank_cd`) and, when chunks have embeddings
 * and a provider is configured, the nearest ones by cosine similarity, fused by reciprocal rank (RRF, k = 60). A
 * passage's score is its fused score over the best a passage could get (first in every list), so 1 is the top of
 * every ranking and `score_threshold` keeps the same meaning whether vectors took part or not.
 */

export const RRF_K = 60

export interface Passage extends Candidate {
  readonly fusedScore: number
}

export interface SearchOptions {
  readonly query: string
  readonly maxResults: number
  readonly scoreThreshold: number
  readonly fileIds: ReadonlyArray<FileId> | undefined
  readonly filter: Filter | undefined
}

/** Fuses ranked lists by reciprocal rank; the same chunk in several lists adds up. */
export const fuse = (lists: ReadonlyArray<ReadonlyArray<Candidate>>): Array<Passage> => {
  const byKey = new Map<string, { candidate: Candidate; sum: number }>()
  for (const list of lists) {
    list.forEach((candidate, index) => {
      const key = `${candidate.storeId}/${candidate.fileId}/${candidate.generation}/${candidate.seq}`
      const entry = byKey.get(key) ?? { candidate, sum: 0 }
      entry.sum += 1 / (RRF_K + index + 1)
      byKey.set(key, entry)
    })
  }
  const best = lists.filter((list) => list.length > 0).length / (RRF_K + 1)
  return [...byKey.values()]
    .map(({ candidate, sum }) => ({ ...candidate, fusedScore: best === 0 ? 0 : sum / best }))
    .sort((a, b) => b.fusedScore - a.fusedScore || a.storeId.localeCompare(b.storeId) || a.fileId.localeCompare(b.fileId) || a.seq - b.seq)
}

export class Retrieval extends Effect.Service<Retrieval>()("atrium/knowledge/Retrieval", {
  effect: Effect.gen(function*() {
    const config = yield* KnowledgeConfig
    const repo = yield* SearchRepo
    const wallets = yield* Wallets
    // Vectors take part only where the column exists and a provider is configured; with a provider set, the
    // extension is tried once more here (pgvector installed after the migration ran).
    const vectors = Option.isNone(config.embeddings)
      ? false
      : (yield* repo.hasEmbeddings) || (yield* Effect.orDie(addEmbeddings))
    if (Option.isSome(config.embeddings) && !vectors) {
      yield* Effect.logWarning("knowledge: an embedding provider is configured but the database has no vector extension; search is full-text only")
    }
    const indexed = new Set<number>()
    const ensureIndex = (dims: number) =>
      indexed.has(dims) ? Effect.void : repo.ensureIndex(dims).pipe(
        Effect.tap(() => Effect.sync(() => indexed.add(dims))),
        Effect.catchAll((error) => Effect.logWarning(`knowledge: the HNSW index for ${dims} dimensions could not be built`, error))
      )

    /** The query's embedding, paid by `payer`; none (full-text only) when the provider fails or the wallet refuses. */
    const queryVector = (payer: UserId, query: string) =>
      Effect.gen(function*() {
        if (!vectors || Option.isNone(config.embeddings)) return Option.none<{ literal: string; dims: number }>()
        const settings = config.embeddings.value
        const embedded = yield* Effect.either(embed(settings, config.embeddingsTimeout, [query]))
        if (embedded._tag === "Left") {
          yield* Effect.logWarning(`knowledge: the query could not be embedded (${embedded.left.message}); full-text only`)
          return Option.none()
        }
        const cost = (BigInt(embedded.right.tokens) * settings.pricePer1k + 999n) / 1000n
        if (cost > 0n) {
          const paid = yield* Effect.either(wallets.charge(payer, cost, {
            kind: "usage",
            scope: "knowledge",
            key: newId("kq"),
            description: `Knowledge search (${settings.model}, ${embedded.right.tokens} tokens embedded)`
          }))
          if (paid._tag === "Left") return Option.none()
          // Said to the run's `retrieval` span when a run searches (its trace shows what the search cost).
          yield* chargedToSpan(cost)
        }
        const vector = embedded.right.vectors[0]!
        yield* ensureIndex(vector.length)
        return Option.some({ literal: vectorLiteral(vector), dims: vector.length })
      })

    /** The best passages of `stores` for `options.query`, `payer` paying for the query's embedding. */
    const search = Effect.fn("Retrieval.search")(function*(
      stores: ReadonlyArray<{ readonly id: string; readonly language: string }>,
      options: SearchOptions,
      payer: UserId
    ) {
      if (stores.length === 0) return { passages: [] as Array<Passage>, ranker: "full_text" as const }
      const scope = { storeIds: stores.map((s) => s.id), fileIds: options.fileIds, filter: options.filter }
      const depth = Math.max(options.maxResults * 3, 30)
      const languages = [...new Set(stores.map((s) => s.language))]
      const [text, vector] = yield* Effect.all([
        repo.fullText(scope, languages, options.query, depth),
        Effect.flatMap(queryVector(payer, options.query), Option.match({
          onNone: () => Effect.succeed(Option.none<ReadonlyArray<Candidate>>()),
          onSome: (q) => Effect.map(repo.nearest(scope, q.literal, q.dims, depth), Option.some)
        }))
      ], { concurrency: 2 })
      const lists = Option.isSome(vector) ? [text, vector.value] : [text]
      const passages = fuse(lists).filter((p) => p.fusedScore >= options.scoreThreshold).slice(0, options.maxResults)
      return { passages, ranker: Option.isSome(vector) ? "hybrid" as const : "full_text" as const }
    })

    return { search, vectors } as const
  }),
  dependencies: [KnowledgeConfig.Default, SearchRepo.Default]
}) {}
