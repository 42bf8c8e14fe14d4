import * as Tool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import { Effect, Schema } from "effect"
import type { ExpertConfig } from "./Expert.js"
import { DELEGATE_TOOL } from "./models/Builtin.js"
import { MAX_DELEGATION_DEPTH, type RunRequest } from "./Run.js"
import type { RemoteTools } from "./tools/Mcp.js"
import { RUN_CODE, RUN_CODE_DESCRIPTION, RunCodeParameters } from "./tools/RunCode.js"
import { FILE_SEARCH, FILE_SEARCH_DESCRIPTION, FileSearchParameters } from "./tools/FileSearch.js"
import { isMemoryTool, MEMORY_ENABLED_TOOLS, MEMORY_TOOL_SPECS } from "./tools/Memory.js"
import { definitionOf, isBuiltinTool, type KnowledgeScope, lenientTool } from "./tools/Tools.js"

/** The tools a run offers its model: the expert's own, its remote MCP servers', knowledge search and the caller's. */

/** `delegate`'s arguments, as the model sees them and as the engine reads them. */
export const DelegateParameters = Schema.Struct({
  agent: Schema.String.annotations({ description: "identifier of one of this agent's subagents" }),
  message: Schema.String.annotations({ description: "what the subagent should do" })
})


/** The knowledge this run's `file_search` searches: the caller's stores, else the expert's own. */
export const knowledgeOf = (request: RunRequest): KnowledgeScope | undefined => {
  const citations = { next: 0 }
  if (request.knowledge !== undefined && request.knowledge.storeIds.length > 0) {
    return { owner: request.payer, storeIds: request.knowledge.storeIds, maxResults: request.knowledge.maxResults ?? 10, citations }
  }
  const own = request.agent.config.knowledge_bases ?? []
  if (own.length === 0) return undefined
  return { owner: { accountId: request.agent.ownerId, endUserId: "" }, storeIds: own, maxResults: 10, citations }
}

/** Whether the expert remembers its end users (blocks in every turn's context, the memory tools). */
export const memoryEnabled = (config: ExpertConfig) => config.memory?.enabled === true

const toolsOf = (config: ExpertConfig, depth: number) => {
  const tools: Record<string, ReturnType<typeof lenientTool>> = {}
  for (const tool of config.tools) if (isBuiltinTool(tool.name)) tools[tool.name] = definitionOf(tool.name)
  // `memory_save` and `memory_search` listed without memory enabled work as the spec has them (facts only).
  const memoryTools = memoryEnabled(config)
    ? MEMORY_ENABLED_TOOLS
    : config.tools.map((tool) => tool.name as string).filter(isMemoryTool)
  for (const name of memoryTools) {
    tools[name] = lenientTool(name, MEMORY_TOOL_SPECS[name].description, MEMORY_TOOL_SPECS[name].parameters)
  }
  if (config.tools.some((tool) => tool.name === RUN_CODE)) {
    tools[RUN_CODE] = lenientTool(RUN_CODE, RUN_CODE_DESCRIPTION, RunCodeParameters)
  }
  if (config.subagents.length > 0 && depth < MAX_DELEGATION_DEPTH) {
    tools[DELEGATE_TOOL] = lenientTool(
      DELEGATE_TOOL,
      `Hands a task to one of your subagents and returns its answer. Subagents: ${config.subagents.join(", ")}.`,
      DelegateParameters
    )
  }
  return tools
}

/**
 * Every tool of the run as one toolkit for the model, or none. The engine resolves the calls itself (policies,
 * approvals, delegation), so the toolkit's own handler is never called.
 */
export const toolkitOf = (request: RunRequest, remote: RemoteTools, withKnowledge: boolean) => {
  const tools = { ...remote.definitions, ...toolsOf(request.agent.config, request.depth) }
  if (withKnowledge) tools[FILE_SEARCH] = lenientTool(FILE_SEARCH, FILE_SEARCH_DESCRIPTION, FileSearchParameters)
  for (const tool of request.clientTools ?? []) {
    tools[tool.name] = Tool.make(tool.name, tool.description === undefined ? {} : { description: tool.description })
      .setParameters(
        Schema.Struct({}, Schema.Record({ key: Schema.String, value: Schema.Unknown })).annotations({
          jsonSchema: (tool.parameters ?? { type: "object", properties: {} }) as object
        })
      ) as unknown as ReturnType<typeof lenientTool>
  }
  return Object.keys(tools).length === 0 ? undefined : ({
    tools,
    handle: () => Effect.dieMessage("the run engine resolves tool calls itself")
  } as unknown as Toolkit.WithHandler<any>)
}
