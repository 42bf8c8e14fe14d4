import { Config, Effect } from "effect"
import { AppConfig, setting } from "../platform/Config.js"

/**
 * Where the tool server listens and what its links point at. `MCP_PATH` is also read by `AppConfig` (the platform's
 * settings at a glance); it is read again here so a path the router cannot mount (no leading `/`, a trailing `/`,
 * a query) stops the start instead of silently serving the tools somewhere else.
 */
export class McpConfig extends Effect.Service<McpConfig>()("atrium/mcp/McpConfig", {
  effect: Effect.gen(function*() {
    const app = yield* AppConfig
    const path = yield* setting("MCP_PATH", Config.string, "/mcp").pipe(
      Config.validate({
        message: "MCP_PATH must be a path such as /mcp: a leading '/', no trailing '/', no query, no spaces",
        validation: (path) => /^\/[A-Za-z0-9._~\-/]*[A-Za-z0-9._~-]$/.test(path) && !path.includes("//")
      })
    )
    return {
      path: path as `/${string}`,
      /** Origins a browser may call the tool server from: the platform's own and `CORS_ORIGINS` (DNS rebinding). */
      allowedOrigins: new Set([new URL(app.baseUrl).origin, ...app.corsOrigins]),
      /** The `Host` the platform is reached by (`PUBLIC_URL`'s, or localhost when it is unset). */
      publicHost: new URL(app.baseUrl).host,
      /** Links handed to the IDE (open_expert_chat, open_platform_page) are absolute: the IDE opens a browser. */
      baseUrl: app.baseUrl,
      /** The address of the tool server itself, as an IDE is told to configure it. */
      url: `${app.baseUrl}${path}`
    } as const
  }),
  dependencies: [AppConfig.Default]
}) {}
