import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { FileId } from "../files/Domain.js"
import { PlatformAuthentication } from "../identity/Domain.js"
import { InvalidRequest, NotFound } from "../platform/Errors.js"
import {
  AddVectorStoreFile,
  CreateVectorStore,
  ListPage,
  ListParams,
  SearchPage,
  SearchRequest,
  UpdateVectorStore,
  VectorStore,
  VectorStoreFile,
  VectorStoreId
} from "./Domain.js"

const StorePath = Schema.Struct({ id: VectorStoreId.unchecked })
const FilePath = Schema.Struct({ id: VectorStoreId.unchecked, file_id: FileId.unchecked })

/** Knowledge bases as OpenAI's vector stores (docs/knowledge.md). */
export class KnowledgeApi extends HttpApiGroup.make("knowledge")
  .add(
    HttpApiEndpoint.post("create", "/v1/vector_stores")
      .setPayload(CreateVectorStore)
      .addSuccess(VectorStore)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Create a knowledge base (vector store)")
      .annotate(OpenApi.Description, "A store of the caller's partition; `file_ids` are added and ingested in the background.")
  )
  .add(
    HttpApiEndpoint.get("list", "/v1/vector_stores")
      .setUrlParams(ListParams)
      .addSuccess(ListPage(VectorStore))
      .annotate(OpenApi.Summary, "List knowledge bases")
  )
  .add(
    HttpApiEndpoint.get("retrieve", "/v1/vector_stores/:id")
      .setPath(StorePath)
      .addSuccess(VectorStore)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Retrieve a knowledge base")
  )
  .add(
    HttpApiEndpoint.post("update", "/v1/vector_stores/:id")
      .setPath(StorePath)
      .setPayload(UpdateVectorStore)
      .addSuccess(VectorStore)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Rename a knowledge base or change its metadata")
  )
  .add(
    HttpApiEndpoint.del("delete", "/v1/vector_stores/:id")
      .setPath(StorePath)
      .addSuccess(Schema.Struct({ id: Schema.String, object: Schema.Literal("vector_store.deleted"), deleted: Schema.Literal(true) }))
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Delete a knowledge base and its chunks (the files stay)")
  )
  .add(
    HttpApiEndpoint.post("addFile", "/v1/vector_stores/:id/files")
      .setPath(StorePath)
      .setPayload(AddVectorStoreFile)
      .addSuccess(VectorStoreFile)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Add a file to a knowledge base")
      .annotate(
        OpenApi.Description,
        "Ingestion runs in the background: poll the file until its status is `completed` or `failed` (with " +
          "`last_error`). Adding a file again re-ingests it, replacing its chunks."
      )
  )
  .add(
    HttpApiEndpoint.get("listFiles", "/v1/vector_stores/:id/files")
      .setPath(StorePath)
      .setUrlParams(ListParams.pipe(Schema.extend(Schema.Struct({
        filter: Schema.optional(Schema.Literal("in_progress", "completed", "failed", "cancelled"))
      }))))
      .addSuccess(ListPage(VectorStoreFile))
      .addError(NotFound)
      .annotate(OpenApi.Summary, "List a knowledge base's files with their status")
  )
  .add(
    HttpApiEndpoint.get("retrieveFile", "/v1/vector_stores/:id/files/:file_id")
      .setPath(FilePath)
      .addSuccess(VectorStoreFile)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "A file of a knowledge base, with its ingestion status")
  )
  .add(
    HttpApiEndpoint.del("deleteFile", "/v1/vector_stores/:id/files/:file_id")
      .setPath(FilePath)
      .addSuccess(Schema.Struct({ id: Schema.String, object: Schema.Literal("vector_store.file.deleted"), deleted: Schema.Literal(true) }))
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Remove a file (and its chunks) from a knowledge base; the file itself stays")
  )
  .add(
    HttpApiEndpoint.post("search", "/v1/vector_stores/:id/search")
      .setPath(StorePath)
      .setPayload(SearchRequest)
      .addSuccess(SearchPage)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Search a knowledge base")
      .annotate(
        OpenApi.Description,
        "Hybrid retrieval: full-text (ts_rank_cd) and, when embeddings are configured, vector similarity, fused by " +
          "reciprocal rank. Each result carries its citation: file, chunk and character range."
      )
  )
  .middleware(PlatformAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Knowledge")
  .annotate(OpenApi.Description, "Knowledge bases (OpenAI-compatible vector stores) and their search.")
{}
