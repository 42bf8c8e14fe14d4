import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Layer, Option } from "effect"
import { AtriumApi } from "../Api.js"
import { AuthenticationLive } from "../identity/Authentication.js"
import { AppConfig } from "../platform/Config.js"
import { Files } from "./Files.js"
import { type FileRow } from "./Repo.js"
import type { FileId } from "./Domain.js"
import { contentDisposition } from "./Storage.js"
import { DEFAULT_LIMIT } from "../platform/http/Lists.js"
import { ownedBy } from "./Policy.js"
import { Caller } from "../identity/Domain.js"

const fileView = (file: FileRow) => ({
  id: file.id,
  filename: file.filename,
  content_type: file.contentType,
  size: file.size,
  sha256: file.sha256,
  created_at: file.createdAt.toISOString()
})

/** OpenAI's file object for a record (its purpose is not kept: `user_data`, OpenAI's purpose for general files). */
const openAiFileView = (file: FileRow, purpose = "user_data") => ({
  id: file.id,
  object: "file" as const,
  bytes: file.size,
  created_at: Math.floor(file.createdAt.getTime() / 1000),
  filename: file.filename,
  purpose,
  status: "processed" as const,
  status_details: null,
  expires_at: null,
  content_type: file.contentType,
  size: file.size,
  sha256: file.sha256
})

/**
 * Where the embedded storage route is reached: `PUBLIC_URL`, or else the address this request came to (a test on a
 * random port, a development machine). Behind a proxy, set `PUBLIC_URL`.
 */
const requestOrigin = Effect.gen(function*() {
  const config = yield* AppConfig
  const request = yield* HttpServerRequest.HttpServerRequest
  const host = request.headers["host"]
  if (Option.isSome(config.publicUrl) || host === undefined || !/^[A-Za-z0-9.:[\]-]+$/.test(host)) return config.baseUrl
  return `http://${host}`
})

/** A multipart file's name as a file name we keep: no path, no control characters, 1-255 characters. */
const safeFilename = (name: string) => {
  const base = name.split(/[\\/]/).pop()!.replace(/[\u0000-\u001f\u007f]/g, "").slice(0, 255)
  return base.length === 0 || base === "." || base === ".." ? "upload" : base
}

export const FilesHttp = HttpApiBuilder.group(AtriumApi, "files", (handlers) =>
  Effect.gen(function*() {
    const files = yield* Files
    const partition = Effect.map(Caller, ownedBy)
    return handlers
      .handle("uploadUrl", ({ payload }) =>
        Effect.gen(function*() {
          const upload = yield* files.createUpload(
            yield* partition,
            { filename: payload.filename, contentType: payload.content_type, size: payload.size },
            yield* requestOrigin
          )
          return {
            upload_id: upload.uploadId,
            upload_url: upload.url,
            method: "PUT" as const,
            headers: upload.headers,
            expires_at: upload.expiresAt.toISOString()
          }
        }))
      .handle("register", ({ payload }) =>
        "upload_id" in payload
          ? Effect.map(Effect.flatMap(partition, (p) => files.register(p, payload.upload_id)), fileView)
          : Effect.gen(function*() {
            const upload = payload.file
            const file = yield* files.uploadDirect(yield* partition, {
              filename: safeFilename(upload.name),
              contentType: /^[\x20-\x7e]{1,255}$/.test(upload.contentType) && upload.contentType.includes("/") ? upload.contentType : "application/octet-stream",
              path: upload.path
            })
            return openAiFileView(file, payload.purpose)
          }))
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const page = yield* files.list(yield* partition, { after: urlParams.after as FileId | undefined, limit: urlParams.limit ?? DEFAULT_LIMIT })
          return { object: "list" as const, data: page.data.map((file) => openAiFileView(file)), has_more: page.has_more }
        }))
      .handle("content", ({ path }) =>
        Effect.gen(function*() {
          const { bytes, file } = yield* files.content(yield* partition, path.id)
          return HttpServerResponse.uint8Array(bytes, {
            contentType: file.contentType,
            headers: { "content-disposition": contentDisposition(file.filename), "x-content-type-options": "nosniff" }
          })
        }))
      .handle("get", ({ path }) =>
        Effect.gen(function*() {
          const { download, file } = yield* files.get(yield* partition, path.id, yield* requestOrigin)
          return { ...fileView(file), download_url: download.url, download_expires_at: download.expiresAt.toISOString() }
        }))
      .handle("delete", ({ path }) =>
        Effect.as(Effect.flatMap(partition, (p) => files.remove(p, path.id)), { id: path.id, deleted: true as const }))
  })).pipe(Layer.provide(AuthenticationLive))

export const FilesHttpLive = FilesHttp.pipe(Layer.provide([Files.Default, AppConfig.Default]))
