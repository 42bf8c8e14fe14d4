import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as Multipart from "@effect/platform/Multipart"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { PlatformAuthentication } from "../identity/Domain.js"
import { InvalidRequest, NotFound } from "../platform/Errors.js"
import { ListParams } from "../platform/http/Lists.js"
import { FileId, FileInUse, UploadId, UploadIncomplete, UploadSizeMismatch } from "./Domain.js"

/** A name to show and to download as: no path, no control characters. */
const Filename = Schema.String.pipe(
  Schema.filter((name) =>
    (name.length >= 1 && name.length <= 255 && !/[\u0000-\u001f\u007f/\\]/.test(name) && name !== "." &&
      name !== "..") || "must be 1-255 characters, without / \\ or control characters"
  )
)

/** `type/subtype` with optional parameters (RFC 6838), printable ASCII only: it becomes a response header. */
const ContentType = Schema.String.pipe(
  Schema.filter((value) =>
    (value.length <= 255 &&
      /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}(\s*;[\x20-\x7e]*)?$/.test(value)) ||
    "must be a media type such as text/plain or application/pdf"
  )
)

const Size = Schema.Number.pipe(
  Schema.filter((n) => (Number.isSafeInteger(n) && n >= 0) || "must be a whole number of bytes, 0 or more")
)

export const FileView = Schema.Struct({
  id: FileId,
  filename: Schema.String,
  content_type: Schema.String,
  size: Schema.Int,
  sha256: Schema.String,
  created_at: Schema.String
})

const Path = Schema.Struct({ id: FileId.unchecked })

/** OpenAI's file object, answered to its one-step (multipart) upload, with our record's fields beside it. */
export const OpenAiFileView = Schema.Struct({
  id: FileId,
  object: Schema.Literal("file"),
  bytes: Schema.Int,
  created_at: Schema.Int,
  filename: Schema.String,
  purpose: Schema.String,
  status: Schema.Literal("processed"),
  status_details: Schema.Null,
  expires_at: Schema.Null,
  content_type: Schema.String,
  size: Schema.Int,
  sha256: Schema.String
})

/** OpenAI's one-step upload: the file and its purpose as `multipart/form-data`. */
const MultipartUpload = HttpApiSchema.Multipart(Schema.Struct({
  file: Multipart.SingleFileSchema,
  purpose: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64))
}))

/** Spec 4.5: the two-step upload, and a file's record. */
export class FilesApi extends HttpApiGroup.make("files")
  .add(
    HttpApiEndpoint.post("uploadUrl", "/v1/files/upload-url")
      .setPayload(Schema.Struct({ filename: Filename, content_type: ContentType, size: Size }))
      .addSuccess(Schema.Struct({
        upload_id: UploadId,
        upload_url: Schema.String,
        method: Schema.Literal("PUT"),
        headers: Schema.Record({ key: Schema.String, value: Schema.String }),
        expires_at: Schema.String
      }))
      .annotate(
        OpenApi.Description,
        "Step 1: a URL to PUT exactly `size` bytes to, with `headers`, before `expires_at`. The bytes go straight to " +
          "object storage, not through this API (no API body limit applies); then register them with POST /v1/files."
      )
  )
  .add(
    HttpApiEndpoint.post("register", "/v1/files")
      .setPayload(Schema.Union(Schema.Struct({ upload_id: UploadId.unchecked.pipe(Schema.minLength(1), Schema.maxLength(64)) }), MultipartUpload))
      // Each answer with its own status, as each protocol has it: 201 for the platform's record, 200 for OpenAI's.
      .addSuccess(FileView, { status: 201 })
      .addSuccess(OpenAiFileView, { status: 200 })
      .addError(NotFound)
      .addError(UploadIncomplete)
      .addError(UploadSizeMismatch)
      .annotate(
        OpenApi.Description,
        "Step 2: record an uploaded file. 409 upload_incomplete while its bytes have not arrived. Or OpenAI's " +
          "one-step upload: `multipart/form-data` with `file` and `purpose` (within the API's body limit), answered " +
          "with OpenAI's file object."
      )
  )
  .add(
    HttpApiEndpoint.get("list", "/v1/files")
      .setUrlParams(ListParams)
      .addSuccess(Schema.Struct({ object: Schema.Literal("list"), data: Schema.Array(OpenAiFileView), has_more: Schema.Boolean }))
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "The caller's files (its account and end user), newest first, as OpenAI's list of file objects; page with " +
          "`limit` (1-100) and `after` (the last id of the previous page). `purpose` is not kept: it reads `user_data`."
      )
  )
  .add(
    HttpApiEndpoint.get("content", "/v1/files/:id/content")
      .setPath(Path)
      .addSuccess(Schema.String)
      .addError(NotFound)
      .annotate(OpenApi.Description, "A file's bytes, with its content type (OpenAI's `files.content`). 404 for a file that is not the caller's.")
  )
  .add(
    HttpApiEndpoint.get("get", "/v1/files/:id")
      .setPath(Path)
      .addSuccess(FileView.pipe(Schema.extend(Schema.Struct({ download_url: Schema.String, download_expires_at: Schema.String }))))
      .addError(NotFound)
      .annotate(OpenApi.Description, "A file's record and a short-lived URL to download its bytes from.")
  )
  .add(
    HttpApiEndpoint.del("delete", "/v1/files/:id")
      .setPath(Path)
      .addSuccess(Schema.Struct({ id: FileId, deleted: Schema.Literal(true) }))
      .addError(NotFound)
      .addError(FileInUse)
      .annotate(OpenApi.Description, "Delete the record and the bytes. 409 file_in_use while an environment lists it.")
  )
  .middleware(PlatformAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Files")
  .annotate(OpenApi.Description, "Uploads a caller registers and experts read (presigned or direct).")
{}
