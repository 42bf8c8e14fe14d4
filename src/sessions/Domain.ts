import { Schema } from "effect"
import { WireError } from "../platform/Errors.js"

/**
 * The sessions domain's contract (docs/architecture.md, "Contracts"): its errors on the wire. Imports only `effect`,
 * `@effect/platform` contract modules and other contracts.
 */

export class SessionBusy extends WireError<SessionBusy>()(
  "SessionBusy",
  { message: Schema.String },
  { status: 409 }
) {}

/** What a message does when it arrives while a turn runs or waits (docs/sessions.md "Double-texting"). */
export const MultitaskStrategy = Schema.Literal("enqueue", "reject", "interrupt", "rollback")
export type MultitaskStrategy = typeof MultitaskStrategy.Type

/** An attachment's file name: a plain name, no directory (it is written under `attachments/`), as the workspace tools take paths. */
export const ATTACHMENT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/
/** As `write_file`'s limit: what `read_file` gives back whole. */
export const ATTACHMENT_BYTES = 100_000
/** Attachments one session keeps: its workspace stays bounded whatever a client sends. */
export const MAX_ATTACHMENTS_PER_SESSION = 50
