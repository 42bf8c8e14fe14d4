import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer } from "effect"
import { AtriumApi } from "../Api.js"
import { AuthenticationLive } from "../identity/Authentication.js"
import { ownedBy } from "./Policy.js"
import { Knowledge } from "./Knowledge.js"
import { Caller } from "../identity/Domain.js"

/** `/v1/vector_stores*`: every call works in the caller's partition (account and `X-End-User-Id`). */
export const KnowledgeHttp = HttpApiBuilder.group(AtriumApi, "knowledge", (handlers) =>
  Effect.gen(function*() {
    const knowledge = yield* Knowledge
    const partition = Effect.map(Caller, ownedBy)
    return handlers
      .handle("create", ({ payload }) =>
        Effect.flatMap(partition, (p) =>
          knowledge.create(p, {
            name: payload.name,
            metadata: payload.metadata,
            language: payload.language,
            fileIds: payload.file_ids,
            chunking: payload.chunking_strategy
          })))
      .handle("list", ({ urlParams }) => Effect.flatMap(partition, (p) => knowledge.list(p, urlParams)))
      .handle("retrieve", ({ path }) => Effect.flatMap(partition, (p) => knowledge.retrieve(p, path.id)))
      .handle("update", ({ path, payload }) => Effect.flatMap(partition, (p) => knowledge.update(p, path.id, payload)))
      .handle("delete", ({ path }) => Effect.flatMap(partition, (p) => knowledge.remove(p, path.id)))
      .handle("addFile", ({ path, payload }) =>
        Effect.flatMap(partition, (p) =>
          knowledge.addFile(p, path.id, { fileId: payload.file_id, attributes: payload.attributes, chunking: payload.chunking_strategy })))
      .handle("listFiles", ({ path, urlParams }) => Effect.flatMap(partition, (p) => knowledge.files(p, path.id, urlParams)))
      .handle("retrieveFile", ({ path }) => Effect.flatMap(partition, (p) => knowledge.file(p, path.id, path.file_id)))
      .handle("deleteFile", ({ path }) => Effect.flatMap(partition, (p) => knowledge.removeFile(p, path.id, path.file_id)))
      .handle("search", ({ path, payload }) => Effect.flatMap(partition, (p) => knowledge.search(p, path.id, payload)))
  })).pipe(Layer.provide(AuthenticationLive))

export const KnowledgeHttpLive = KnowledgeHttp.pipe(Layer.provide(Knowledge.Default))
