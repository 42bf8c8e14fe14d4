import { Effect, Schema } from "effect"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import { AgentFields, AgentRef } from "../agents/Agent.js"
import { Agents } from "../agents/Agents.js"
import { Files } from "../files/Files.js"
import { MaxResults, SearchQuery, StoreName, VectorStoreId } from "../knowledge/Domain.js"
import { Knowledge } from "../knowledge/Knowledge.js"
import { errorType } from "../platform/Errors.js"
import type { Partition } from "../identity/Partition.js"
import type { UserId } from "../platform/Ids.js"
import { type ToolDefinition, ToolFailure, userTool } from "./Tool.js"

/**
 * Knowledge bases from an IDE (issue 32 item 6, docs/knowledge.md): beside the spec's 22 tools. They work in the
 * caller's account-wide partition, as the studio does, so what they make can be attached to the caller's experts.
 */

const proxy = <A, E extends { readonly _tag: string; readonly message: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.mapError(effect, (error) => new ToolFailure({ type: errorType(error._tag), message: error.message }))

const storeId = Schema.propertySignature(VectorStoreId.unchecked.pipe(Schema.minLength(1), Schema.maxLength(64)))
  .annotations({ description: "The knowledge base's id (vs_...)" })

/** The most text `add_knowledge_text` takes in one call. */
const MAX_TEXT = 1_000_000

export class KnowledgeTools extends Effect.Service<KnowledgeTools>()("atrium/mcp/KnowledgeTools", {
  effect: Effect.gen(function*() {
    const knowledge = yield* Knowledge
    const files = yield* Files
    const agents = yield* Agents
    const account = (userId: UserId): Partition => ({ accountId: userId, endUserId: "" })

    /** Text as a file of the caller's: written to a temporary file, stored as a one-step upload would be. */
    const textFile = (userId: UserId, filename: string, text: string) =>
      Effect.acquireUseRelease(
        Effect.promise(() => Fs.mkdtemp(Path.join(Os.tmpdir(), "atrium-mcp-"))),
        (dir) =>
          Effect.gen(function*() {
            const path = Path.join(dir, "data")
            yield* Effect.promise(() => Fs.writeFile(path, text))
            const contentType = /\.md$|\.markdown$/i.test(filename) ? "text/markdown" : /\.html?$/i.test(filename) ? "text/html" : "text/plain"
            return yield* proxy(files.uploadDirect(account(userId), { filename, contentType, path }))
          }),
        (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
      )

    const tools: ReadonlyArray<ToolDefinition> = [
      userTool(
        "list_knowledge_bases",
        "Your knowledge bases (document collections your experts answer from, with citations): id, name, file counts.",
        Schema.Struct({}),
        (_args, caller) => Effect.map(proxy(knowledge.list(account(caller.userId), { limit: 100 })), (page) => ({ knowledge_bases: page.data }))
      ),
      userTool(
        "create_knowledge_base",
        "Create a knowledge base. Add documents with add_knowledge_text, then attach it to an expert with attach_knowledge.",
        Schema.Struct({ name: Schema.propertySignature(StoreName.pipe(Schema.minLength(1))).annotations({ description: "Its name" }) }),
        ({ name }, caller) => proxy(knowledge.create(account(caller.userId), { name }))
      ),
      userTool(
        "add_knowledge_text",
        "Add a document (text, Markdown or HTML, up to 1 MB) to a knowledge base. It is chunked and indexed in the " +
          "background: see knowledge_status.",
        Schema.Struct({
          knowledgeBaseId: storeId,
          filename: Schema.propertySignature(Schema.String.pipe(
            Schema.minLength(1),
            Schema.maxLength(255),
            Schema.pattern(/^[^/\\\u0000-\u001f]+$/, { message: () => "a file name without / or \\" })
          )).annotations({ description: "e.g. manual.md" }),
          text: Schema.propertySignature(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(MAX_TEXT)))
            .annotations({ description: "The document's text" })
        }),
        ({ filename, knowledgeBaseId, text }, caller) =>
          Effect.gen(function*() {
            yield* proxy(knowledge.retrieve(account(caller.userId), knowledgeBaseId))
            const file = yield* textFile(caller.userId, filename, text)
            return yield* proxy(knowledge.addFile(account(caller.userId), knowledgeBaseId, { fileId: file.id }))
          })
      ),
      userTool(
        "knowledge_status",
        "A knowledge base and its documents' ingestion status (in_progress, completed, failed with the reason).",
        Schema.Struct({ knowledgeBaseId: storeId }),
        ({ knowledgeBaseId }, caller) =>
          Effect.gen(function*() {
            const store = yield* proxy(knowledge.retrieve(account(caller.userId), knowledgeBaseId))
            const page = yield* proxy(knowledge.files(account(caller.userId), knowledgeBaseId, { limit: 100 }))
            return { ...store, files: page.data }
          })
      ),
      userTool(
        "search_knowledge",
        "Search a knowledge base: the best passages, each with its file and character range.",
        Schema.Struct({
          knowledgeBaseId: storeId,
          query: Schema.propertySignature(SearchQuery).annotations({ description: "What to look for" }),
          maxResults: Schema.optionalWith(MaxResults, { default: () => 5 })
            .annotations({ description: "Passages, 1-50 (default 5)", default: 5 })
        }),
        ({ knowledgeBaseId, maxResults, query }, caller) =>
          proxy(knowledge.search(account(caller.userId), knowledgeBaseId, { query, max_num_results: maxResults }))
      ),
      userTool(
        "attach_knowledge",
        "Give one of your experts these knowledge bases (replacing its list; [] removes them): it then gets a " +
          "file_search tool and answers from them with citations.",
        Schema.Struct({
          identifier: Schema.propertySignature(AgentRef).annotations({ description: "The expert's identifier" }),
          knowledgeBaseIds: Schema.propertySignature(AgentFields.knowledge_bases).annotations({ description: "Knowledge base ids" })
        }),
        ({ identifier, knowledgeBaseIds }, caller) =>
          Effect.map(proxy(agents.update(identifier, caller.userId, { knowledge_bases: knowledgeBaseIds })), (agent) => ({
            identifier: agent.identifier,
            knowledge_bases: agent.draft.knowledge_bases ?? []
          }))
      )
    ]
    return { tools } as const
  }),
  dependencies: [Knowledge.Default, Files.Default, Agents.Default]
}) {}
