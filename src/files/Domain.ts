import { Schema } from "effect"
import { WireError } from "../platform/Errors.js"
import { prefixedId } from "../platform/Ids.js"

/**
 * The files domain's contract (docs/architecture.md, "Contracts"): its errors on the wire. Imports only `effect`,
 * `@effect/platform` contract modules and other contracts.
 */

/** A file's id (`file_…`, DESIGN.md §6). */
export const FileId = prefixedId("file", "FileId")
export type FileId = typeof FileId.Type

/** A pending upload's id (`upl_…`): 24 characters, not 20, so the id an upload URL names is harder to guess. */
export const UploadId = prefixedId("upl", "UploadId")
export type UploadId = typeof UploadId.Type

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
