import * as HttpLayerRouter from "@effect/platform/HttpLayerRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type Tool
} from "@modelcontextprotocol/sdk/types.js"
import { Effect, Either, Layer, Option, Runtime, Schema, Stream, type Tracer } from "effect"
import { RunPayerLive } from "../billing/RunPayerLive.js"
import { TraceWriterLive } from "../traces/Writer.js"
import { KnowledgeSearchLive } from "../knowledge/KnowledgeSearchLive.js"
import { ExpertMemoryLive } from "../memory/ExpertMemoryLive.js"
import { credentialOf, credentialText } from "../platform/http/Bearer.js"
import { jsonProblem } from "../platform/http/Text.js"
import { CANCELLABLE, McpCancels } from "./Cancels.js"
import { McpConfig } from "./Config.js"
import { McpProgress, type ProgressExtra, progressFromExtra, type ProgressReport } from "./EngineTools.js"
import { registerExtras } from "./Extras.js"
import { McpIdentity } from "./Identity.js"
import { TOOL_OUTPUTS } from "./Outputs.js"
import { McpResources } from "./Resources.js"
import {
  decodeInput,
  describeIssues,
  jsonSchemaOf,
  type McpCaller,
  type ToolDefinition,
  toolError,
  type ToolFailure,
  toolSuccess
} from "./Tool.js"
import { McpTools } from "./Tools.js"
import { Wallets } from "../billing/Wallets.js"

const SERVER_INFO = { name: "atrium", version: "1.0.0" }

/** A tool's human title: its name as words ("create_expert" -> "Create expert"). */
const titleOf = (name: string) => name.charAt(0).toUpperCase() + name.slice(1).replace(/_/g, " ")

/** Tools that only read: safe to call again, change nothing. */
const READ_ONLY = new Set([
  "get_creator_profile",
  "get_expert_detail",
  "list_my_experts",
  "list_expert_skills",
  "list_marketplace_skills",
  "get_submission_status",
  "open_expert_chat",
  "open_platform_page",
  "list_evolution_suggestions",
  "get_evolution_stats",
  "get_earnings",
  "browse_marketplace"
])
/** Tools that overwrite what an expert was (its fields, its billing, an accepted suggestion's change). */
const DESTRUCTIVE = new Set(["update_expert", "set_billing", "accept_evolution"])
/** Writes whose repetition with the same arguments changes nothing more. */
const IDEMPOTENT = new Set(["update_expert", "set_billing", "install_skill"])

/**
 * MCP's tool annotations (hints an IDE shows or uses to ask before a call): read-only, destructive, idempotent, and
 * open-world only for `test_expert`, whose run reaches a model and the expert's remote tools.
 */
const annotationsOf = (name: string) => {
  const readOnly = READ_ONLY.has(name)
  return {
    title: titleOf(name),
    readOnlyHint: readOnly,
    destructiveHint: !readOnly && DESTRUCTIVE.has(name),
    idempotentHint: readOnly || IDEMPOTENT.has(name),
    openWorldHint: name === "test_expert"
  }
}

/** The messages of a request body (one, or a batch); none when it is not JSON (the SDK answers that). */
const messagesOf = (body: ArrayBuffer): ReadonlyArray<any> => {
  try {
    const parsed: unknown = JSON.parse(new TextDecoder().decode(body))
    return Array.isArray(parsed) ? parsed : [parsed]
  } catch {
    return []
  }
}

const jsonRpcError = (status: number, code: number, message: string, id: unknown = null) =>
  HttpServerResponse.unsafeJson({ jsonrpc: "2.0", error: { code, message }, id: id ?? null }, { status })

/**
 * A failure of a resource read or a completion as JSON-RPC's error (the SDK sends a thrown error's `code` and
 * `message`): what the caller asked for is wrong (an unknown expert or version, another's) -> invalid params
 * (-32602); only our own failure is -32603 (issue 44 gap 3: an unknown resource was -32603).
 */
const rpcErrorOf = (failure: ToolFailure) =>
  Object.assign(new Error(failure.message), { code: failure.type === "internal_error" ? ErrorCode.InternalError : ErrorCode.InvalidParams })

/** Methods that read the caller's own things: without a valid credential they are HTTP 401 (issue 44 gap 3). */
const IDENTITY_METHODS: ReadonlySet<string> = new Set(["resources/list", "resources/read", "completion/complete"])

/**
 * The SDK's `McpError` puts `MCP error <code>: ` in its message, which its server sends as it is and its client
 * prefixes again (`MCP error -32602: MCP error -32602: Resource ... not found`): the prefix is taken off the error
 * messages of a JSON answer, since the code is there already.
 */
const withoutCodePrefix = (body: Uint8Array): Uint8Array => {
  let parsed: unknown
  try {
    parsed = JSON.parse(new TextDecoder().decode(body))
  } catch {
    return body
  }
  let changed = false
  const strip = (message: any) => {
    const text = message?.error?.message
    if (typeof text !== "string") return message
    const bare = text.replace(/^(MCP error -?\d+: )+/, "")
    if (bare === text) return message
    changed = true
    return { ...message, error: { ...message.error, message: bare } }
  }
  const fixed = Array.isArray(parsed) ? parsed.map(strip) : strip(parsed)
  return changed ? new TextEncoder().encode(JSON.stringify(fixed)) : body
}

const LOOPBACK = /^(localhost|127(?:\.\d{1,3}){3}|\[::1\])(?::\d+)?$/i

/**
 * What the SDK leaves to its server: a call of a tool that does not exist is JSON-RPC's invalid params (-32602), not
 * a tool result; a `cursor` is refused, since every list fits one page and no cursor was ever handed out.
 */
const refusal = (messages: ReadonlyArray<any>, names: ReadonlySet<string>) => {
  for (const message of messages) {
    if (typeof message !== "object" || message === null) continue
    if (message.method === "tools/call" && !names.has(message.params?.name)) {
      return jsonRpcError(200, -32602, `Unknown tool: ${String(message.params?.name).slice(0, 100)}`, message.id)
    }
    if (typeof message.method === "string" && message.method.endsWith("/list") && message.params?.cursor !== undefined) {
      return jsonRpcError(200, -32602, "Invalid cursor: every list is one page, with no nextCursor", message.id)
    }
  }
  return undefined
}

/** Whether a request (or a batch) carries a `progressToken`: the client wants `notifications/progress`. */
const asksForProgress = (body: ArrayBuffer) => {
  try {
    const parsed: unknown = JSON.parse(new TextDecoder().decode(body))
    const messages = Array.isArray(parsed) ? parsed : [parsed]
    return messages.some((message) => message?.params?._meta?.progressToken !== undefined)
  } catch {
    return false
  }
}

/**
 * NUL, a lone surrogate, an out-of-range number or over-deep nesting anywhere in the message (tool arguments
 * included) is the caller's bad input, as on every other route (docs/http.md): 400 before the SDK or a tool sees it.
 * The body is JSON-RPC's error (`code`, `message`, the request's `id`) and the platform's (`type`), so an MCP client
 * and anything reading the platform's envelope both understand it. Unparseable JSON is left to the SDK (-32700).
 */
const textRefusal = (body: ArrayBuffer) => {
  let parsed: unknown
  try {
    parsed = JSON.parse(new TextDecoder().decode(body))
  } catch {
    return undefined
  }
  const problem = jsonProblem(parsed)
  if (problem === undefined) return undefined
  const id = !Array.isArray(parsed) && typeof parsed === "object" && parsed !== null && "id" in parsed ? parsed.id : null
  return HttpServerResponse.unsafeJson({
    jsonrpc: "2.0",
    id: typeof id === "string" || typeof id === "number" ? id : null,
    error: { code: -32602, type: "invalid_request", message: `Invalid request: ${problem.field}: ${problem.problem}` }
  }, { status: 400 })
}

const INSTRUCTIONS =
  "Atrium's tools for creating, configuring, publishing and monetising AI experts. Every tool but " +
  "browse_marketplace acts for the signed-in user: send Authorization: Bearer <login token or API key (sk_...)>."

/**
 * A stateless server has no stream to open (GET) and no session to end (DELETE). The SDK's web transport would
 * answer a GET with an event stream that never carries anything, so these are refused here, as the SDK's stateless
 * examples do, with a JSON-RPC error body (which the platform's error middleware passes through as it is).
 */
const methodNotAllowed = HttpServerResponse.unsafeJson(
  { jsonrpc: "2.0", error: { code: -32000, message: "Method not allowed: this stateless MCP server takes POST only." }, id: null },
  { status: 405, headers: { allow: "POST" } }
)

/**
 * Headers the transport must not see again: those of the connection (the body is handed over whole) and the
 * credentials, which were read already and have no business inside the SDK.
 */
const DROPPED = new Set([
  "host",
  "connection",
  "keep-alive",
  "content-length",
  "transfer-encoding",
  "upgrade",
  "expect",
  "authorization",
  "cookie"
])

/**
 * The MCP tool server (spec 4.10, 5.4) at `MCP_PATH`: Streamable HTTP, stateless. Each POST gets a fresh `McpServer`
 * and transport, so nothing is shared between requests and any process of a cluster can answer any request.
 * Responses are plain JSON (`enableJsonResponse`): one answer per request, nothing to stream without sessions.
 */
export const McpRoute = Layer.effectDiscard(Effect.gen(function*() {
  const router = yield* HttpLayerRouter.HttpRouter
  const config = yield* McpConfig
  const identity = yield* McpIdentity
  const { tools } = yield* McpTools
  const resources = yield* McpResources
  const cancels = yield* McpCancels
  const toolNames = new Set(tools.map((tool) => tool.name))
  const toolsByName = new Map(tools.map((tool) => [tool.name, tool]))
  /** `tools/list`, made once: each tool's JSON Schemas come from its Effect Schemas (`Tool.ts`, `Outputs.ts`). */
  const listed: Array<Tool> = tools.map((tool) => {
    const output = TOOL_OUTPUTS[tool.name]
    return {
      name: tool.name,
      title: titleOf(tool.name),
      description: tool.description,
      inputSchema: jsonSchemaOf(tool.input),
      ...(output === undefined ? {} : { outputSchema: jsonSchemaOf(output) }),
      annotations: annotationsOf(tool.name)
    }
  })
  /** A result checked against the tool's output schema before it leaves, as the SDK's own tool server does. */
  const checkOutput = (tool: ToolDefinition, value: unknown): Either.Either<unknown, string> => {
    const output = TOOL_OUTPUTS[tool.name]
    if (output === undefined) return Either.right(value)
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      return Either.left(`Tool ${tool.name} has an output schema but no structured content was provided`)
    }
    return Either.mapLeft(
      Schema.validateEither(output, { errors: "all" })(value),
      (error) => `Invalid structured content for tool ${tool.name}: ${describeIssues(error)}`
    ).pipe(Either.map(() => value))
  }
  // The SDK calls tools through promises; this runtime (the layer's) is what their effects run on.
  const runtime = yield* Effect.runtime<never>()
  const runTool = Runtime.runPromise(runtime)

  /** Runs one tool; whatever happens, the IDE gets a tool result, never a JSON-RPC error. */
  const call = (
    tool: ToolDefinition,
    args: unknown,
    caller: Effect.Effect<McpCaller, ToolFailure>,
    parent: Option.Option<Tracer.AnySpan>,
    progress: ProgressReport,
    cancelled?: Effect.Effect<void>
  ) => {
    const answer = Effect.gen(function*() {
      // The arguments first (as the SDK's tool server checks them), then, spec 5.4: an identity-bound tool without a
      // valid caller fails here and never runs.
      const input = yield* decodeInput(tool, args)
      const who = tool.identity === "required" ? yield* caller : undefined
      const value = yield* tool.run(input, who)
      const checked = checkOutput(tool, value)
      if (Either.isLeft(checked)) {
        yield* Effect.logError(`MCP tool ${tool.name}: output validation error`, checked.left)
        return toolError("internal_error", `Output validation error: ${checked.left}`)
      }
      return toolSuccess(value)
    }).pipe(
      Effect.catchAll((failure) => Effect.succeed(toolError(failure.type, failure.message))),
      Effect.catchAllDefect((defect) =>
        Effect.as(
          Effect.logError(`MCP tool ${tool.name} failed`, defect),
          toolError("internal_error", "Something went wrong on our side.")
        )
      ),
      Effect.withSpan(`Mcp.${tool.name}`, Option.match(parent, { onNone: () => ({}), onSome: (span) => ({ parent: span }) })),
      Effect.provideService(McpProgress, progress)
    )
    // `notifications/cancelled` (any runner may take it): the call is interrupted, which stops its run (recorded
    // `cancelled`, billing no further step), and the client, which gave up on it, is answered a tool error.
    return cancelled === undefined || !CANCELLABLE.has(tool.name)
      ? answer
      : Effect.raceFirst(answer, Effect.as(cancelled, toolError("cancelled", "The client cancelled this call.")))
  }

  /** A server for one request, its tools bound to that request's caller. */
  const serverFor = (caller: Effect.Effect<McpCaller, ToolFailure>, parent: Option.Option<Tracer.AnySpan>, credential: string) => {
    // `logging` lets clients set a level (`logging/setLevel`); a stateless server sends no log notifications.
    const server = new McpServer(SERVER_INFO, { instructions: INSTRUCTIONS, capabilities: { logging: {} } })
    // The tools capability before their handlers (the SDK checks it when a handler is set).
    server.server.registerCapabilities({ tools: { listChanged: false } })
    // Tools through the SDK's low-level handlers, which take JSON Schema: `registerTool` would want zod schemas.
    server.server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: listed }))
    server.server.setRequestHandler(CallToolRequestSchema, (request, extra): Promise<CallToolResult> => {
      const tool = toolsByName.get(request.params.name)
      // `refusal` answers an unknown name before the SDK is reached; this is the same answer, should one get here.
      if (tool === undefined) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`)
      const progress = progressFromExtra(extra as unknown as ProgressExtra)
      return runTool(call(tool, request.params.arguments, caller, parent, progress, cancels.cancelled(credential, extra.requestId)), { signal: extra.signal })
    })
    const asCaller = <A>(read: (who: McpCaller) => Effect.Effect<A, ToolFailure>) =>
      // Rejected with the error itself (a failed `runPromise` rejects with a wrapper the SDK cannot read a code from).
      runTool(Effect.either(Effect.flatMap(caller, read))).then((outcome) => {
        if (Either.isLeft(outcome)) throw rpcErrorOf(outcome.left)
        return outcome.right
      })
    registerExtras(
      server,
      (name, args) => asCaller((who) => toolsByName.get(name)!.run(args, who)),
      (what, identifier) =>
        asCaller((who): Effect.Effect<unknown, ToolFailure> =>
          what === "versions" ? resources.versions(identifier, who) : resources.runs(identifier, who)
        )
    )
    // The sets never change while a server lives (one per request): nothing would ever notify a change.
    server.server.registerCapabilities({ tools: { listChanged: false }, resources: { listChanged: false }, prompts: { listChanged: false } })
    return server
  }

  /**
   * A request whose tool call asked for progress (a `progressToken`): answered as an SSE stream, the progress
   * notifications as they happen and the result last, since a JSON answer has no room for notifications. The server
   * lives until the stream ends; a client that leaves ends it, which aborts the tool (its fiber is interrupted).
   */
  const streamed = (web: Request, caller: Effect.Effect<McpCaller, ToolFailure>, parent: Option.Option<Tracer.AnySpan>, credential: string) =>
    Effect.gen(function*() {
      const server = serverFor(caller, parent, credential)
      const transport = new WebStandardStreamableHTTPServerTransport({})
      const close = Effect.promise(() => server.close())
      const answer = yield* Effect.promise(async () => {
        await server.connect(transport)
        return transport.handleRequest(web)
      }).pipe(Effect.onInterrupt(() => close))
      const headers: Record<string, string> = {}
      answer.headers.forEach((value, name) => {
        if (name !== "content-type" && name !== "content-length") headers[name] = value
      })
      const contentType = answer.headers.get("content-type") ?? "text/event-stream"
      if (answer.body === null) {
        yield* close
        return HttpServerResponse.empty({ status: answer.status, headers })
      }
      const body = answer.body
      return HttpServerResponse.stream(
        Stream.fromReadableStream({ evaluate: () => body, onError: (error) => error }).pipe(Stream.ensuring(close)),
        { status: answer.status, headers, contentType }
      )
    })

  const handle = Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    // DNS rebinding (MCP's transport rules): a page on another site must not reach the tools through a name that
    // resolves here. The Host must be the platform's or a loopback one; a browser's Origin, one allowed.
    const host = request.headers["host"] ?? ""
    if (host !== config.publicHost && !LOOPBACK.test(host)) return jsonRpcError(403, -32000, "Forbidden: this Host is not served here")
    const origin = request.headers["origin"]
    if (origin !== undefined && !config.allowedOrigins.has(origin) && !LOOPBACK.test(origin.replace(/^https?:\/\//, ""))) {
      return jsonRpcError(403, -32000, "Forbidden: this Origin may not call the tool server")
    }
    if (request.method !== "POST") return methodNotAllowed
    // Read under the platform's body limit (`MAX_BODY_BYTES`, set by the error middleware). A failed read goes on
    // as a defect, as HttpApi's do: the middleware answers it 413 (too large) or 400, in the platform's error body.
    const body = yield* Effect.orDie(request.arrayBuffer)
    const refused = textRefusal(body) ?? refusal(messagesOf(body), toolNames)
    if (refused !== undefined) return refused
    const headers = new Headers()
    for (const [name, value] of Object.entries(request.headers)) {
      if (!DROPPED.has(name)) headers.set(name, value)
    }
    const web = new Request(new URL(request.url, config.baseUrl), { method: "POST", headers, body })
    const caller = yield* identity.forRequest(request)
    const parent = yield* Effect.option(Effect.currentSpan)
    // Reading the caller's experts (resources, completion) needs a caller: without one, HTTP 401 with
    // `WWW-Authenticate` (set by the edge on every 401), as an MCP client expects to start signing in.
    const needsCaller = messagesOf(body).find((message) => IDENTITY_METHODS.has(message?.method))
    if (needsCaller !== undefined) {
      const who = yield* Effect.either(caller)
      if (Either.isLeft(who) && who.left.type === "unauthorized") return jsonRpcError(401, -32001, who.left.message, needsCaller.id)
    }
    // Whose calls a cancel may stop: the same credential sent the call and its cancel.
    const credential = credentialText(credentialOf(request))
    for (const message of messagesOf(body)) {
      const requestId = message?.method === "notifications/cancelled" ? message.params?.requestId : undefined
      if (typeof requestId === "string" || typeof requestId === "number") yield* cancels.cancel(credential, requestId)
    }
    if (asksForProgress(body)) return yield* streamed(web, caller, parent, credential)
    const response = yield* Effect.acquireUseRelease(
      Effect.sync(() => ({
        server: serverFor(caller, parent, credential),
        // No `sessionIdGenerator` is stateless mode (the SDK's `sessionIdGenerator: undefined`, which
        // `exactOptionalPropertyTypes` will not let us write): no `Mcp-Session-Id`, no session checks.
        transport: new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: true })
      })),
      ({ server, transport }) =>
        Effect.promise(async () => {
          await server.connect(transport)
          const answer = await transport.handleRequest(web)
          // Read whole before the server closes: in JSON mode the answer is complete once it resolves.
          return { status: answer.status, headers: answer.headers, body: new Uint8Array(await answer.arrayBuffer()) }
        }),
      // Closing also aborts the signal of a tool still running (the client went away): its fiber is interrupted.
      ({ server }) => Effect.promise(() => server.close())
    )
    const contentType = response.headers.get("content-type") ?? undefined
    const passed: Record<string, string> = {}
    response.headers.forEach((value, name) => {
      if (name !== "content-type" && name !== "content-length") passed[name] = value
    })
    if (response.body.length === 0) return HttpServerResponse.empty({ status: response.status, headers: passed })
    return HttpServerResponse.uint8Array(contentType?.includes("json") === true ? withoutCodePrefix(response.body) : response.body, {
      status: response.status,
      headers: passed,
      ...(contentType === undefined ? {} : { contentType })
    })
  }).pipe(Effect.withSpan("Mcp.request"))

  yield* router.add("*", config.path, handle)
})).pipe(
  Layer.provide([McpConfig.Default, McpIdentity.Default, McpTools.Default, McpResources.Default, McpCancels.Default]),
  // The same layer values the API routes use, so the process keeps one set of wallet clients.
  Layer.provide([RunPayerLive, KnowledgeSearchLive, ExpertMemoryLive, TraceWriterLive]),
  Layer.provide(Wallets.Default)
)
