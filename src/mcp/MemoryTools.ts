import { Effect, Schema } from "effect"
import { AgentRef } from "../agents/Agent.js"
import { Agents } from "../agents/Agents.js"
import { Memory } from "../memory/Memory.js"
import { errorType } from "../platform/Errors.js"
import { MemoryBlockSetting, MAX_BLOCKS } from "../runtime/Expert.js"
import { type ToolDefinition, ToolFailure, userTool } from "./Tool.js"

/**
 * Memory from an IDE (issue 47 item 3, docs/memory.md): the creator's side only. An expert's memory configuration
 * and how much it remembers in all; what it remembers of any end user stays that end user's.
 */

const proxy = <A, E extends { readonly _tag: string; readonly message: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.mapError(effect, (error) => new ToolFailure({ type: errorType(error._tag), message: error.message }))

export class MemoryTools extends Effect.Service<MemoryTools>()("atrium/mcp/MemoryTools", {
  effect: Effect.gen(function*() {
    const agents = yield* Agents
    const memory = yield* Memory

    const tools: ReadonlyArray<ToolDefinition> = [
      userTool(
        "configure_memory",
        "Turn memory on or off for one of your experts and set the blocks it keeps about each end user (label, " +
          "description, limit in characters, read_only). Without `enabled` and `blocks` it only shows the current " +
          "setting. Also answers how many end users it remembers and how much in all, never what.",
        Schema.Struct({
          identifier: Schema.propertySignature(AgentRef).annotations({ description: "The expert's identifier" }),
          enabled: Schema.optional(Schema.Boolean).annotations({ description: "Whether the expert remembers its end users" }),
          blocks: Schema.optional(Schema.Array(MemoryBlockSetting).pipe(Schema.maxItems(MAX_BLOCKS)))
            .annotations({ description: "The blocks (replacing the list); each {label, description, limit, read_only?}" })
        }),
        ({ blocks, enabled, identifier }, caller) =>
          Effect.gen(function*() {
            let agent = yield* proxy(agents.owned(identifier, caller.userId))
            if (enabled !== undefined || blocks !== undefined) {
              const current = agent.draft.memory ?? { enabled: false, blocks: [] }
              agent = yield* proxy(agents.update(identifier, caller.userId, {
                memory: { enabled: enabled ?? current.enabled, blocks: blocks ?? current.blocks }
              }))
            }
            const usage = yield* memory.usage(agent.id)
            return {
              identifier: agent.identifier,
              memory: agent.draft.memory ?? { enabled: false, blocks: [] },
              usage: { end_users: usage.endUsers, facts: usage.facts, blocks: usage.blocks }
            }
          })
      )
    ]
    return { tools } as const
  }),
  dependencies: [Agents.Default, Memory.Default]
}) {}
