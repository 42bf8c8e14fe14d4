import { Effect } from "effect"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import { z } from "zod"
import { Agents } from "../agents/Agents.js"
import { Files } from "../files/Files.js"
import { Knowledge } from "../knowledge/Knowledge.js"
import { errorType } from "../platform/Errors.js"
import { type ToolDefinition, ToolFailure, userTool } from "./Tool.js"

/**
 * Knowledge bases from an IDE (issue 32 item 6, docs/knowledge.md): beside the spec's 22 tools. They work in the
 * caller's account-wide partition, as the studio does, so what they make can be attached to the caller's experts.
 */

const proxy = <A, E extends { readonly _tag: string; readonly message: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.mapError(effect, (error) => new ToolFailure({ type: errorType(error._tag), message: error.message }))

const storeId = z.string().min(1).max(64).describe("The knowledge base's id (vs_...)")

/** The most text `add_knowledge_text` takes in one call. */
const MAX_TEXT = 1_000_000

export class KnowledgeTools extends Effect.Service<KnowledgeTools>()("atrium/mcp/KnowledgeTools", {
  effect: Effect.gen(function*() {
    const knowledge = yield* Knowledge
    const files = yield* Files
    const agents = yield* Agents
    const account = (userId: string) => ({ accountId: userId, endUserId: "" })

    /** Text as a file of the caller's: written to a temporary file, stored as a one-step upload would be. */
    const textFile = (userId: string, filename: string, text: string) =>
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
        z.object({}).strict(),
        (_args, caller) => Effect.map(proxy(knowledge.list(account(caller.userId), { limit: 100 })), (page) => ({ knowledge_bases: page.data }))
      ),
      userTool(
        "create_knowledge_base",
        "Create a knowledge base. Add documents with add_knowledge_text, then attach it to an expert with attach_knowledge.",
        z.object({ name: z.string().min(1).max(256).describe("Its name") }).strict(),
        ({ name }, caller) => proxy(knowledge.create(account(caller.userId), { name }))
      ),
      userTool(
        "add_knowledge_text",
        "Add a document (text, Markdown or HTML, up to 1 MB) to a knowledge base. It is chunked and indexed in the " +
          "background: see knowledge_status.",
        z.object({
          knowledgeBaseId: storeId,
          filename: z.string().min(1).max(255).regex(/^[^/\\\u0000-\u001f]+$/, "a file name without / or \\").describe("e.g. manual.md"),
          text: z.string().min(1).max(MAX_TEXT).describe("The document's text")
        }).strict(),
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
        z.object({ knowledgeBaseId: storeId }).strict(),
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
        z.object({
          knowledgeBaseId: storeId,
          query: z.string().min(1).max(4000).describe("What to look for"),
          maxResults: z.number().int().min(1).max(50).default(5).describe("Passages, 1-50 (default 5)")
        }).strict(),
        ({ knowledgeBaseId, maxResults, query }, caller) =>
          proxy(knowledge.search(account(caller.userId), knowledgeBaseId, { query, max_num_results: maxResults }))
      ),
      userTool(
        "attach_knowledge",
        "Give one of your experts these knowledge bases (replacing its list; [] removes them): it then gets a " +
          "file_search tool and answers from them with citations.",
        z.object({
          identifier: z.string().min(1).max(64).describe("The expert's identifier"),
          knowledgeBaseIds: z.array(storeId).max(10).describe("Knowledge base ids")
        }).strict(),
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
