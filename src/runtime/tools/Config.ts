import { Config, Effect } from "effect"
import { setting } from "../../platform/Config.js"

/** The settings of tool traffic (docs/tools.md), read once. */
export class ToolsConfig extends Effect.Service<ToolsConfig>()("atrium/runtime/tools/ToolsConfig", {
  effect: Config.all({
    /**
     * `TOOL_ALLOWED_HOSTS`: hosts or addresses a tool may reach although they are special-purpose (private,
     * loopback, ...: Outbound.ts), comma-separated, compared in lower case. Unset or empty: none.
     */
    allowedHosts: Config.string("TOOL_ALLOWED_HOSTS").pipe(
      Config.withDefault(""),
      Config.map((raw): ReadonlySet<string> =>
        new Set(raw.split(",").map((host) => host.trim().toLowerCase()).filter((host) => host.length > 0))
      )
    ),
    /** How long a remote MCP server may take to connect, list its tools or answer a call. */
    mcpTimeoutMs: setting("MCP_TOOL_TIMEOUT_MS", Config.integer, 30_000).pipe(
      Config.validate({ message: "MCP_TOOL_TIMEOUT_MS must be a positive number of milliseconds", validation: (n) => n > 0 })
    )
  })
}) {}
