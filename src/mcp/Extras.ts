import { type McpServer, ResourceTemplate } from "@modelcontextprotocol/sdk/server/mcp.js"
import { z } from "zod"

/**
 * What the tool server offers beside tools (MCP resources, prompts, completion): the caller's experts as readable
 * JSON resources, an `atrium://experts/{identifier}` template whose identifier completes from them, and two prompts.
 * Everything reads through the tools' own `run` (`read`), so identity and visibility are the tools' rules.
 */

/** Runs a tool for the request's caller and gives its value; a failure rejects (the SDK answers a JSON-RPC error). */
export type ReadTool = (name: string, args: Record<string, unknown>) => Promise<unknown>

const EXPERT_URI = "atrium://experts/"

const myExperts = async (read: ReadTool) => {
  const listed = (await read("list_my_experts", {})) as { data: ReadonlyArray<{ identifier: string; name?: string; description?: string }> }
  return listed.data
}

export const registerExtras = (server: McpServer, read: ReadTool) => {
  server.registerResource(
    "expert",
    new ResourceTemplate(`${EXPERT_URI}{identifier}`, {
      list: async () => ({
        resources: (await myExperts(read)).map((expert) => ({
          uri: `${EXPERT_URI}${expert.identifier}`,
          name: expert.identifier,
          title: expert.name ?? expert.identifier,
          ...(expert.description === undefined ? {} : { description: expert.description }),
          mimeType: "application/json"
        }))
      }),
      complete: {
        identifier: async (value) =>
          (await myExperts(read)).map((expert) => expert.identifier).filter((identifier) => identifier.startsWith(value))
      }
    }),
    { title: "Expert", description: "One of your experts (get_expert_detail), as JSON.", mimeType: "application/json" },
    async (uri, variables) => ({
      contents: [{
        uri: uri.href,
        mimeType: "application/json",
        text: JSON.stringify(await read("get_expert_detail", { identifier: String(variables.identifier) }))
      }]
    })
  )

  server.registerPrompt(
    "create_expert_from_description",
    {
      title: "Create an expert from a description",
      description: "Drafts an expert (name, category, instructions) from what it should do, then creates it.",
      argsSchema: { description: z.string().describe("What the expert should do, for whom") }
    },
    ({ description }) => ({
      messages: [{
        role: "user",
        content: {
          type: "text",
          text: `Create an Atrium expert for this: ${description}\n\nChoose a short name, the best marketplace category ` +
            "and a one-paragraph description, call create_expert with them, then tell me its identifier and what to " +
            "configure next in the studio (instructions, tools)."
        }
      }]
    })
  )

  server.registerPrompt(
    "improve_expert_from_runs",
    {
      title: "Improve an expert from its runs",
      description: "Reads an expert's evolution suggestions (from its runs) and proposes which to accept.",
      argsSchema: { identifier: z.string().describe("The expert's identifier") }
    },
    ({ identifier }) => ({
      messages: [{
        role: "user",
        content: {
          type: "text",
          text: `Improve my Atrium expert ${identifier}. Call get_expert_detail and list_evolution_suggestions for it, ` +
            "explain what its recent runs show, and accept_evolution only the suggestions I agree with."
        }
      }]
    })
  )
}
