import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"

/**
 * The files domain's contract (docs/architecture.md, "Contracts"): its errors on the wire. Imports only `effect`,
 * `@effect/platform` contract modules and other contracts.
 */

export class UploadIncomplete extends Schema.TaggedError<UploadIncomplete>()(
  "UploadIncomplete",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 409 })
) {}

export class UploadSizeMismatch extends Schema.TaggedError<UploadSizeMismatch>()(
  "UploadSizeMismatch",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 409 })
) {}

export class FileInUse extends Schema.TaggedError<FileInUse>()(
  "FileInUse",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 409 })
) {}
