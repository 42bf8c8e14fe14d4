import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect, Layer, Option } from "effect"
import { AtriumApi } from "../Api.js"
import { AuthenticationLive, Caller } from "../identity/Authentication.js"
import { AppConfig } from "../platform/Config.js"
import { Files } from "./Files.js"
import { type FileRow } from "./Repo.js"
import { partitionOf } from "../identity/Partition.js"

const fileView = (file: FileRow) => ({
  id: file.id,
  filename: file.filename,
  content_type: file.contentType,
  size: file.size,
  sha256: file.sha256,
  created_at: file.createdAt.toISOString()
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

export const FilesHttp = HttpApiBuilder.group(AtriumApi, "files", (handlers) =>
  Effect.gen(function*() {
    const files = yield* Files
    const partition = Effect.map(Caller, partitionOf)
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
        Effect.map(Effect.flatMap(partition, (p) => files.register(p, payload.upload_id)), fileView))
      .handle("get", ({ path }) =>
        Effect.gen(function*() {
          const { download, file } = yield* files.get(yield* partition, path.id, yield* requestOrigin)
          return { ...fileView(file), download_url: download.url, download_expires_at: download.expiresAt.toISOString() }
        }))
      .handle("delete", ({ path }) =>
        Effect.as(Effect.flatMap(partition, (p) => files.remove(p, path.id)), { id: path.id, deleted: true as const }))
  })).pipe(Layer.provide(AuthenticationLive))

export const FilesHttpLive = FilesHttp.pipe(Layer.provide([Files.Default, AppConfig.Default]))
