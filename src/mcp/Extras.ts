import { type McpServer, ResourceTemplate } from "@modelcontextprotocol/sdk/server/mcp.js"
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js"
import { z } from "zod"

/**
 * What the tool server offers beside tools (MCP resources, prompts, completion): the caller's experts, each of their
 * versions and their last runs as readable JSON resources, under three templates whose identifier (and version)
 * complete from them, and two prompts. The expert reads through the tools' own `run` (`read`), versions and runs
 * through `Resources.ts` (`readMore`), both for the request's caller: identity and visibility are the tools' rules.
 */

/** Runs a tool for the request's caller and gives its value; a failure rejects (the SDK answers a JSON-RPC error). */
export type ReadTool = (name: string, args: Record<string, unknown>) => Promise<unknown>

/** Reads an expert's versions or last runs for the request's caller (`McpResources`); a failure rejects. */
export type ReadMore = (what: "versions" | "runs", identifier: string) => Promise<unknown>

interface VersionsView {
  readonly data: ReadonlyArray<{ readonly version: number; readonly name: string; readonly published: boolean }>
}

const EXPERT_URI = "atrium://experts/"

const myExperts = async (read: ReadTool) => {
  const listed = (await read("list_my_experts", {})) as { data: ReadonlyArray<{ identifier: string; name?: string; description?: string }> }
  return listed.data
}

const json = (uri: URL, value: unknown) => ({ contents: [{ uri: uri.href, mimeType: "application/json", text: JSON.stringify(value) }] })

/** An identifier the caller may complete from: their experts' that start with `value`. */
const completeIdentifier = (read: ReadTool) => async (value: string) =>
  (await myExperts(read)).map((expert) => expert.identifier).filter((identifier) => identifier.startsWith(value))

export const registerExtras = (server: McpServer, read: ReadTool, readMore: ReadMore) => {
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
      complete: { identifier: completeIdentifier(read) }
    }),
    { title: "Expert", description: "One of your experts (get_expert_detail), as JSON.", mimeType: "application/json" },
    async (uri, variables) => json(uri, await read("get_expert_detail", { identifier: String(variables.identifier) }))
  )

  server.registerResource(
    "expert_version",
    new ResourceTemplate(`${EXPERT_URI}{identifier}/versions/{version}`, {
      list: async () => {
        const resources = []
        for (const expert of await myExperts(read)) {
          const versions = (await readMore("versions", expert.identifier)) as VersionsView
          for (const version of versions.data) {
            resources.push({
              uri: `${EXPERT_URI}${expert.identifier}/versions/${version.version}`,
              name: `${expert.identifier}@${version.version}`,
              title: `${version.name}, version ${version.version}${version.published ? " (published)" : ""}`,
              mimeType: "application/json"
            })
          }
        }
        return { resources }
      },
      complete: {
        identifier: completeIdentifier(read),
        version: async (value, context) => {
          const identifier = context?.arguments?.identifier
          if (identifier === undefined) return []
          const versions = (await readMore("versions", identifier).catch(() => ({ data: [] }))) as VersionsView
          return versions.data.map((version) => String(version.version)).filter((version) => version.startsWith(value))
        }
      }
    }),
    {
      title: "Expert version",
      description: "One version of one of your experts: its metadata, billing, tools and review state, as JSON.",
      mimeType: "application/json"
    },
    async (uri, variables) => {
      const versions = (await readMore("versions", String(variables.identifier))) as VersionsView
      const found = versions.data.find((version) => String(version.version) === String(variables.version))
      if (found === undefined) throw new McpError(ErrorCode.InvalidParams, `No version ${String(variables.version)} of ${String(variables.identifier)}`)
      return json(uri, found)
    }
  )

  server.registerResource(
    "expert_runs",
    new ResourceTemplate(`${EXPERT_URI}{identifier}/runs`, {
      list: async () => ({
        resources: (await myExperts(read)).map((expert) => ({
          uri: `${EXPERT_URI}${expert.identifier}/runs`,
          name: `${expert.identifier} runs`,
          title: `Last runs of ${expert.name ?? expert.identifier}`,
          mimeType: "application/json"
        }))
      }),
      complete: { identifier: completeIdentifier(read) }
    }),
    {
      title: "Expert runs",
      description: "The last 20 runs of one of your experts, newest first: status, failure code, tokens, version, as JSON.",
      mimeType: "application/json"
    },
    async (uri, variables) => json(uri, await readMore("runs", String(variables.identifier)))
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
