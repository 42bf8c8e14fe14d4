import { Schema } from "effect"
import { WireError } from "../platform/Errors.js"
import { newId } from "../platform/Ids.js"

/**
 * The files domain's contract (docs/architecture.md, "Contracts"): its errors on the wire. Imports only `effect`,
 * `@effect/platform` contract modules and other contracts.
 */

/**
 * A file's id (`file_…`, DESIGN.md §6). The brand is a compile-time name only: the wire carries the same string, and a
 * path or body that names a wrong id still answers "not found", as before.
 */
export const FileId = Schema.String.pipe(Schema.brand("FileId"))
export type FileId = typeof FileId.Type
export const newFileId = (): FileId => FileId.make(newId("file"))

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
