import { Effect, Option } from "effect"
import { Approvals, type Decision } from "./Approvals.js"
import { DELEGATE_TOOL } from "./models/Builtin.js"
import { ExpertMemory, KnowledgeSearch } from "./Ports.js"
import { RunsRepo } from "./Repo.js"
import type { Emit, RunRequest } from "./Run.js"
import type { RemoteTools } from "./tools/Mcp.js"
import { CodeRunner, RUN_CODE } from "./tools/RunCode.js"
import { FILE_SEARCH, runFileSearch } from "./tools/FileSearch.js"
import { storableText, storableValue } from "../platform/Storable.js"
import { isMemoryTool, runMemoryTool } from "./tools/Memory.js"
import { isBuiltinTool, runBuiltin, type ToolContext } from "./tools/Tools.js"
import { annotateSpan, Attr, contentCaptured, contentOf, genAiSpan, Operation } from "./Tracing.js"

/**
 * A run's tool calls: each through the expert's policy (denied, asked for, or run), and its outcome told as events
 * and handed back to the model.
 */
export class ToolCalls extends Effect.Service<ToolCalls>()("atrium/runtime/ToolCalls", {
  effect: Effect.gen(function*() {
    const repo = yield* RunsRepo
    const approvals = yield* Approvals
    const codeRunner = yield* CodeRunner
    const knowledgeSearch = yield* KnowledgeSearch
    // Optional: a layer of the engine built without memory (a test's) gives memory tools that say so when called.
    const memory = yield* Effect.serviceOption(ExpertMemory)

    /** A tool call through the agent's policy: denied, asked for, or run; the result goes back to the model. */
    const runToolCall = (
      /**
       * `key`: the call's idempotency key, the run and the call's place in it (`<run id>:<step>/<index>`), the same on
       * every try of the call (a durable run's tool step tried again after a fault, which a replay reaches at the same
       * place); not the model's call id, which a provider may repeat from one step to the next.
       */
      toolCall: { id: string; name: string; params: unknown; key: string },
      policies: ReadonlyMap<string, "allow" | "ask" | "deny">,
      context: ToolContext,
      request: RunRequest,
      remote: RemoteTools,
      emit: Emit,
      /** Runs a `delegate` call: a child run, which only the engine can start. */
      delegate: (toolCallId: string, params: unknown) => Effect.Effect<unknown, { message: string }>,
      /** The answer to an `ask` call, already waited for elsewhere (a background run's, `DurableSteps.approve`). */
      decided: Option.Option<Decision> = Option.none()
    ) =>
      Effect.gen(function*() {
        const { id, name, params } = toolCall
        const deny = (reason: string) =>
          Effect.as(emit({ type: "tool_denied", tool_call_id: id, name, reason }), {
            isFailure: true,
            denied: true,
            result: `The tool call was denied: ${reason}`
          })
        const policy = name === DELEGATE_TOOL ? "allow" : policies.get(name)
        if (policy === undefined) return yield* deny("the agent does not have this tool")
        if (policy === "deny") return yield* deny("denied by the agent's tool policy")
        if (policy === "ask" && Option.isSome(decided)) {
          if (!decided.value.approved) return yield* deny(decided.value.reason.length > 0 ? decided.value.reason : "denied by the user")
        } else if (policy === "ask") {
          const approval = yield* approvals.open(request.payer, request.sessionId)
          yield* emit({
            type: "Ask",
            approval_id: approval.id,
            tool_call_id: id,
            name,
            arguments: params,
            expires_at: approval.expiresAt.toISOString()
          })
          const decision = yield* approval.wait.pipe(
            Effect.tap((decision) => annotateSpan({ [Attr.approvalDecision]: decision.approved ? "approved" : "denied" })),
            genAiSpan(`${Operation.approval} ${name}`, {
              attributes: { [Attr.operation]: Operation.approval, [Attr.toolName]: name, [Attr.approvalId]: approval.id }
            })
          )
          if (!decision.approved) return yield* deny(decision.reason.length > 0 ? decision.reason : "denied by the user")
        }

        yield* emit({ type: "tool_call", tool_call_id: id, name, status: "running" })
        const outcome = yield* Effect.either(
          name === DELEGATE_TOOL
            ? delegate(id, params)
            : remote.has(name)
            ? remote.call(name, params, toolCall.key)
            : name === FILE_SEARCH && context.knowledge !== undefined
            ? Effect.provideService(runFileSearch(params, context, request.payer.accountId), KnowledgeSearch, knowledgeSearch)
            : name === RUN_CODE
            ? codeRunner.run(params, { ...context, holder: request.sandbox!, environmentId: request.environmentId ?? null })
            : isMemoryTool(name)
            ? runMemoryTool(name, params, Option.fromNullable(context.memory), memory, toolCall.key)
            : isBuiltinTool(name)
            ? Effect.provideService(runBuiltin(name, params, context), RunsRepo, repo)
            : Effect.fail({ message: `Unknown tool ${name}.` })
        )
        if (outcome._tag === "Left") {
          const code = (outcome.left as { code?: unknown }).code
          // A remote tool's error text is stored too.
          const message = storableText(outcome.left.message)
          yield* emit({
            type: "tool_call",
            tool_call_id: id,
            name,
            status: "failed",
            error: message,
            ...(typeof code === "string" ? { code } : {})
          })
          return { isFailure: true, denied: false, result: message }
        }
        // A tool's result is stored (the session's log, a durable step's record) and goes back to the model.
        const result = storableValue(outcome.right)
        yield* emit({ type: "tool_call", tool_call_id: id, name, status: "completed" })
        yield* emit({ type: "tool_call_result", tool_call_id: id, output: result })
        return { isFailure: false, denied: false, result }
      }).pipe(
        Effect.tap((outcome) =>
          Effect.gen(function*() {
            if (outcome.isFailure) yield* annotateSpan({ [Attr.errorType]: outcome.denied ? "denied" : "tool_error" })
            if (yield* contentCaptured) {
              yield* annotateSpan({
                [Attr.toolArguments]: contentOf(toolCall.params),
                [Attr.toolResult]: contentOf(outcome.result)
              })
            }
          })
        ),
        // `execute_tool {tool}`, or `retrieval` for knowledge search (the GenAI conventions, docs/traces.md).
        genAiSpan(toolCall.name === FILE_SEARCH ? Operation.retrieval : `execute_tool ${toolCall.name}`, {
          attributes: {
            [Attr.operation]: toolCall.name === FILE_SEARCH ? Operation.retrieval : Operation.executeTool,
            [Attr.toolName]: toolCall.name,
            [Attr.toolCallId]: toolCall.id,
            [Attr.toolType]: toolCall.name === FILE_SEARCH ? "datastore" : remote.has(toolCall.name) ? "extension" : "function"
          }
        })
      )

    /** Whether a call of `name` waits for a human's approval first (the agent's policy `ask`). */
    const asks = (name: string, policies: ReadonlyMap<string, "allow" | "ask" | "deny">) =>
      name !== DELEGATE_TOOL && policies.get(name) === "ask"

    return { run: runToolCall, asks } as const
  }),
  dependencies: [RunsRepo.Default, Approvals.Default, CodeRunner.Default]
}) {}
