import { Schema } from "effect"
import { prefixedId } from "../platform/Ids.js"
import { BUILTIN_TOOLS } from "../runtime/Expert.js"

/**
 * The evolution domain's contract (docs/architecture.md, "Contracts"): what a suggestion changes. Imports only
 * `effect` and other contracts.
 */

/** A suggestion's id (`sug_…`). */
export const SuggestionId = prefixedId("sug", "SuggestionId")
export type SuggestionId = typeof SuggestionId.Type

/** A change to an agent's configuration: what accepting a suggestion does, to the draft and the published version. */
export const Change = Schema.Union(
  Schema.Struct({ type: Schema.Literal("append_instructions"), text: Schema.String }),
  Schema.Struct({
    type: Schema.Literal("set_tool_permission"),
    tool: Schema.Literal(...BUILTIN_TOOLS),
    permission: Schema.Literal("allow", "ask", "deny")
  }),
  Schema.Struct({ type: Schema.Literal("remove_tool"), tool: Schema.Literal(...BUILTIN_TOOLS) }),
  Schema.Struct({ type: Schema.Literal("set_model"), model: Schema.String }),
  Schema.Struct({ type: Schema.Literal("append_opening_message"), text: Schema.String })
)
export type Change = typeof Change.Type
