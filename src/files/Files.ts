import { Clock, Duration, Effect, Option, Schema } from "effect"
import * as Fs from "node:fs/promises"
import { InvalidRequest, NotFound } from "../platform/Errors.js"
import { randomBase62 } from "../platform/Ids.js"
import { KeyValue } from "../platform/KeyValue.js"
import { FilesConfig } from "./Config.js"
import { type FileRow, FilesRepo } from "./Repo.js"
import { newStorageKey, ObjectStorage, ObjectStorageLive } from "./Storage.js"
import type { Partition } from "../identity/Partition.js"
import { FileInUse, FileId, UploadId, UploadIncomplete, UploadSizeMismatch } from "./Domain.js"
import { canRegister } from "./Policy.js"

/** An upload URL handed out and not yet registered; it lives in the key-value store as long as the URL. */
const PendingUpload = Schema.parseJson(Schema.Struct({
  ownerId: Schema.String,
  endUserId: Schema.String,
  filename: Schema.String,
  contentType: Schema.String,
  size: Schema.Int,
  storageKey: Schema.String
}))
const encodePending = Schema.encodeSync(PendingUpload)
const decodePending = Schema.decodeUnknownOption(PendingUpload)

const pendingKey = (uploadId: UploadId) => `upload:${uploadId}`

/**
 * Files (spec 4.5): a two-step upload. `createUpload` reserves a storage key and signs a PUT URL for exactly the
 * announced size; the client sends the bytes straight to storage; `register` checks that they arrived whole and
 * records the file. Files belong to one partition (account and end user).
 */
export class Files extends Effect.Service<Files>()("atrium/files/Files", {
  effect: Effect.gen(function*() {
    const config = yield* FilesConfig
    const repo = yield* FilesRepo
    const storage = yield* ObjectStorage
    const kv = yield* KeyValue

    const createUpload = Effect.fn("Files.createUpload")(function*(
      partition: Partition,
      input: { readonly filename: string; readonly contentType: string; readonly size: number },
      origin: string
    ) {
      if (input.size > config.maxBytes) {
        return yield* new InvalidRequest({
          message: `Invalid request: size: files are limited to ${config.maxBytes} bytes (FILE_MAX_BYTES).`
        })
      }
      const uploadId = UploadId.make(`upl_${randomBase62(24)}`)
      const storageKey = newStorageKey()
      const now = yield* Clock.currentTimeMillis
      const expiresAt = new Date(now + Duration.toMillis(config.uploadTtl))
      yield* kv.set(
        pendingKey(uploadId),
        encodePending({ ownerId: partition.accountId, endUserId: partition.endUserId, filename: input.filename, contentType: input.contentType, size: input.size, storageKey }),
        config.uploadTtl
      )
      const signed = yield* storage.uploadUrl(storageKey, {
        size: input.size,
        contentType: input.contentType,
        expiresAt,
        origin
      })
      return { uploadId, ...signed }
    })

    const register = Effect.fn("Files.register")(function*(partition: Partition, uploadId: UploadId) {
      const pending = Option.flatMap(yield* kv.get(pendingKey(uploadId)), decodePending).pipe(
        Option.filter((p) => canRegister(partition, p))
      )
      if (Option.isNone(pending)) {
        return yield* new NotFound({
          message: `No pending upload ${uploadId}: upload URLs expire, and a registered upload cannot be registered again.`
        })
      }
      const upload = pending.value
      const stored = yield* storage.stat(upload.storageKey)
      if (Option.isNone(stored)) {
        return yield* new UploadIncomplete({
          message: `The bytes of upload ${uploadId} have not arrived: PUT them to its upload_url first.`
        })
      }
      if (stored.value.size !== upload.size) {
        // The store holds another size than was announced (and signed): drop them, so a correct PUT can follow.
        yield* storage.remove(upload.storageKey)
        return yield* new UploadSizeMismatch({
          message: `Upload ${uploadId} announced ${upload.size} bytes but ${stored.value.size} arrived.`
        })
      }
      const file = yield* repo.insert({
        id: FileId.random(),
        ownerId: partition.accountId,
        endUserId: partition.endUserId,
        filename: upload.filename,
        contentType: upload.contentType,
        size: stored.value.size,
        sha256: stored.value.sha256,
        storageKey: upload.storageKey
      })
      yield* kv.delete(pendingKey(uploadId))
      return file
    })

    /**
     * OpenAI's one-step upload (`multipart/form-data` on `POST /v1/files`): the bytes came through the API (within
     * its body limit, `MAX_BODY_BYTES`) into a temporary file; they are stored and recorded at once.
     */
    const uploadDirect = Effect.fn("Files.uploadDirect")(function*(
      partition: Partition,
      input: { readonly filename: string; readonly contentType: string; readonly path: string }
    ) {
      const size = yield* Effect.promise(() => Fs.stat(input.path).then((stats) => stats.size))
      if (size > config.maxBytes) {
        return yield* new InvalidRequest({ message: `Invalid request: file: files are limited to ${config.maxBytes} bytes (FILE_MAX_BYTES).` })
      }
      const storageKey = newStorageKey()
      yield* storage.put(storageKey, input.path, size, input.contentType)
      const stored = yield* storage.stat(storageKey)
      if (Option.isNone(stored)) return yield* Effect.dieMessage("an object just stored is not there")
      return yield* repo.insert({
        id: FileId.random(),
        ownerId: partition.accountId,
        endUserId: partition.endUserId,
        filename: input.filename,
        contentType: input.contentType,
        size: stored.value.size,
        sha256: stored.value.sha256,
        storageKey
      })
    })

    const notFound = (id: FileId) => new NotFound({ message: `No file ${id}.` })

    const get = Effect.fn("Files.get")(function*(partition: Partition, id: FileId, origin: string) {
      const file = yield* repo.byId(partition, id)
      if (Option.isNone(file)) return yield* notFound(id)
      const now = yield* Clock.currentTimeMillis
      const download = yield* storage.downloadUrl(file.value.storageKey, {
        filename: file.value.filename,
        contentType: file.value.contentType,
        expiresAt: new Date(now + Duration.toMillis(config.downloadTtl)),
        origin
      })
      return { file: file.value, download }
    })

    /** One page of the partition's files, newest first; an `after` that is not the partition's file is a 404. */
    const list = Effect.fn("Files.list")(function*(partition: Partition, page: { readonly after: FileId | undefined; readonly limit: number }) {
      if (page.after !== undefined && Option.isNone(yield* repo.byId(partition, page.after))) {
        return yield* new NotFound({ message: `after: ${page.after} is not in this list.` })
      }
      const rows = yield* repo.list(partition, { after: page.after ?? null, limit: page.limit })
      return { data: rows.slice(0, page.limit), has_more: rows.length > page.limit }
    })

    /**
     * A file's bytes, for `GET /v1/files/:id/content`: the record is read in the caller's partition first, so
     * another partition's file is a 404 and its bytes are never read. Read whole, within `FILE_MAX_BYTES`.
     */
    const content = Effect.fn("Files.content")(function*(partition: Partition, id: FileId) {
      const file = yield* repo.byId(partition, id)
      if (Option.isNone(file)) return yield* notFound(id)
      const bytes = yield* storage.read(file.value.storageKey, Math.max(config.maxBytes, file.value.size))
      if (Option.isNone(bytes)) return yield* notFound(id)
      return { file: file.value, bytes: bytes.value }
    })

    /** Record first, bytes after: a file is never listed without its bytes. */
    const remove = Effect.fn("Files.remove")(function*(partition: Partition, id: FileId) {
      const outcome = yield* repo.remove(partition, id)
      switch (outcome._tag) {
        case "Missing":
          return yield* notFound(id)
        case "InUse":
          return yield* new FileInUse({
            message: `File ${id} is used by environment ${outcome.environments.join(", ")}: remove it there first.`
          })
        case "Deleted":
          yield* storage.remove(outcome.storageKey)
      }
    })

    return { createUpload, register, uploadDirect, get, list, content, remove } as const
  }),
  dependencies: [FilesConfig.Default, FilesRepo.Default, ObjectStorageLive]
}) {}

export type { FileRow }
