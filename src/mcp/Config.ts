import { Effect } from "effect"
import { AppConfig } from "../platform/Config.js"

/** Where the tool server listens (`MCP_PATH`, read and checked by `AppConfig`) and what its links point at. */
export class McpConfig extends Effect.Service<McpConfig>()("atrium/mcp/McpConfig", {
  effect: Effect.gen(function*() {
    const app = yield* AppConfig
    const path = app.mcpPath
    return {
      path,
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
