import { Schema } from "effect"
import { WireError } from "../platform/Errors.js"

/**
 * The files domain's contract (docs/architecture.md, "Contracts"): its errors on the wire. Imports only `effect`,
 * `@effect/platform` contract modules and other contracts.
 */

export class UploadIncomplete extends WireError<UploadIncomplete>()(
  "UploadIncomplete",
  { message: Schema.String },
  { status: 409 }
) {}

export class UploadSizeMismatch extends WireError<UploadSizeMismatch>()(
  "UploadSizeMismatch",
  { message: Schema.String },
  { status: 409 }
) {}

export class FileInUse extends WireError<FileInUse>()(
  "FileInUse",
  { message: Schema.String },
  { status: 409 }
) {}
