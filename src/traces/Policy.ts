import { Option } from "effect"
import type { CallerIdentity } from "../identity/Domain.js"
import type { UserId } from "../platform/Ids.js"

/**
 * Who reads which traces (issue 49: the domain's rules in one file; docs/traces.md).
 *
 * - A caller reads their own runs' traces: the same account and end user, strictly, as every run read.
 * - Acting as the account itself (no `X-End-User-Id`), they also read every trace of their experts' runs, buyers'
 *   included: the creator's view. A creator never learns a buyer's end user (a summary says only `creator`).
 * - Nobody else reads a trace: it is `No trace of run …`, as if it did not exist.
 * - Content (messages, tool arguments and results) is in a trace only where its expert captures it: the expert's
 *   live `trace_content` setting, read when the run starts (`Runs.runnable`) and applied by the run engine as it
 *   writes spans, so no reader ever sees content the creator did not turn on.
 *
 * The filter itself is SQL (`TracesRepo`'s `readable`: payer and end user, or the expert's owner when `asCreator`);
 * a `Reader` is built only here, so the repository is never asked with a view these rules did not give.
 */
export interface Reader {
  readonly accountId: UserId
  readonly endUserId: string
  /** The expert's creator's view is included (only when acting as the account itself). */
  readonly asCreator: boolean
}

/** What a caller reads: their own runs, and the creator's view when acting as the account itself. */
export const readerOf = (caller: CallerIdentity): Reader => {
  const endUserId = Option.getOrElse(caller.endUserId, () => "")
  return { accountId: caller.userId, endUserId, asCreator: endUserId === "" }
}

/**
 * Narrowed to one of the account's end users (`?end_user=`): that end user's own runs only, what the account would
 * see with their header. A caller acting for one end user cannot ask for another's: none (an empty page).
 */
export const endUserReader = (reader: Reader, endUserId: string): Option.Option<Reader> =>
  reader.endUserId !== "" && reader.endUserId !== endUserId
    ? Option.none()
    : Option.some({ accountId: reader.accountId, endUserId, asCreator: false })

/** The creator's view alone, as their account (a dataset's row made from one of their experts' runs). */
export const creatorReader = (accountId: UserId): Reader => ({ accountId, endUserId: "", asCreator: true })

/** How a listed trace is the reader's: their own run, or one they see as its expert's creator. */
export const accessOf = (reader: Reader, trace: { readonly payerId: string; readonly endUserId: string }): "own" | "creator" =>
  trace.payerId === reader.accountId && trace.endUserId === reader.endUserId ? "own" : "creator"
