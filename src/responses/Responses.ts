import type * as Prompt from "@effect/ai/Prompt"
import { Chunk, Effect, Either, Option, Stream } from "effect"
import { InvalidRequest, NotFound } from "../platform/Errors.js"
import { newId, type SessionId } from "../platform/Ids.js"
import { RunId } from "../runtime/Domain.js"
import type { InternalEvent } from "../runtime/Events.js"
import { fromTextFormat, toTextFormat } from "../runtime/models/OutputFormat.js"
import type { RunRequest } from "../runtime/Run.js"
import { clientToolsOf, runError } from "../runs/OpenAi.js"
import { Runs } from "../runs/Runs.js"
import { BackgroundRuns, type StoredRequest } from "../runs/Background.js"
import { RunRecords, TERMINAL } from "../runs/Repo.js"
import { wireStatus } from "../runs/Views.js"
import { Sessions } from "../sessions/Sessions.js"
import { type InputItem, type ResponsePayload, ResponseId, ResponseItemId } from "./Api.js"
import { type ResponseRow, ResponsesRepo } from "./Repo.js"
import { fileSearchOf } from "./FileSearch.js"
import { type Frame, ResponseBuilder, suffix } from "./Builder.js"
import { KnowledgeRepo } from "../knowledge/Repo.js"
import { ownedBy } from "./Policy.js"
import type { CallerIdentity } from "../identity/Domain.js"

/**
 * `/v1/responses` on the platform's runs and sessions (docs/runs.md "Responses"). An agent's conversation lives in a
 * session: a response that starts one (a single user message, nothing else to carry) creates it, and
 * `previous_response_id` or `conversation` sends the next message into it, so the agent's approvals, budgets and
 * usage apply as in any session. A conversation a session cannot hold (a bare model, the caller's own tools, a
 * request that carries its whole history, `store: false`) runs statelessly; its messages are kept with the response
 * so `previous_response_id` continues it too.
 */

const invalid = (param: string, message: string) => new InvalidRequest({ message: `Invalid request: ${param}: ${message}`, param })


/** Input items as stored and listed: each with an id, messages with typed content parts. */
const storedItems = (input: ResponsePayload["input"]) =>
  (typeof input === "string" ? [{ role: "user" as const, content: input }] : input).map((item) => {
    if (item.type === "function_call") {
      return { id: item.id ?? `fc_${suffix(item.call_id ?? newId("fc"))}`, type: "function_call", call_id: item.call_id, name: item.name, arguments: item.arguments, status: "completed" }
    }
    if (item.type === "function_call_output") {
      return { id: item.id ?? newId("fco"), type: "function_call_output", call_id: item.call_id, output: item.output, status: "completed" }
    }
    const parts = typeof item.content === "string" ? [{ type: "text", text: item.content }] : item.content ?? []
    return {
      id: item.id ?? newId("msg"),
      type: "message",
      role: item.role,
      status: "completed",
      content: parts.map((part) => ({ type: item.role === "assistant" ? "output_text" : "input_text", text: part.text ?? "" }))
    }
  })

/**
 * A background response's run: `run_` and the response id's own part (docs/runs.md), so either names the other
 * without a column for it.
 */
export const runIdOf = (responseId: ResponseId) => RunId.make(`run_${suffix(responseId)}`)

/** What a background response's run keeps (`StoredRequest.response`) to fold its log into the response, anywhere. */
interface StoredResponse {
  readonly id: ResponseId
  readonly model: string
  readonly createdAt: number
  readonly previousResponseId: ResponseId | null
  readonly clientTools: ReadonlyArray<string>
  readonly fileSearch?: { readonly includeResults: boolean } | undefined
  readonly extra: Record<string, unknown>
}

const builderOf = (stored: StoredResponse) =>
  new ResponseBuilder({ ...stored, conversation: null, clientTools: new Set(stored.clientTools), background: true })

/** A response created with `background: true` (its body says so, as OpenAI's does). */
const isBackground = (row: ResponseRow) => (row.body as { background?: unknown }).background === true

const TEXT_PARTS = new Set(["text", "input_text", "output_text"])

/** A session turn's messages as input items (ids made from the turn, so a listing is stable across pages). */
const itemsOfTurn = (turn: number, messages: ReadonlyArray<Prompt.MessageEncoded>): Array<{ id: string }> =>
  messages.flatMap((message, m) => {
    const parts = typeof message.content === "string"
      ? [{ type: "text", text: message.content }]
      : (message.content as ReadonlyArray<{ type: string; text?: string; id?: string; name?: string; params?: unknown; result?: unknown }>)
    const text = parts.filter((part) => part.type === "text").map((part) => part.text ?? "").join("")
    const items: Array<{ id: string } & Record<string, unknown>> = []
    if (text.length > 0 && message.role !== "tool") {
      const role = message.role === "assistant" ? "assistant" : message.role === "system" ? "system" : "user"
      items.push({
        id: `msg_t${turn}_${m}`,
        type: "message",
        role,
        status: "completed",
        content: [{ type: role === "assistant" ? "output_text" : "input_text", text }]
      })
    }
    for (const part of parts) {
      if (part.type === "tool-call") {
        items.push({ id: `fc_t${turn}_${part.id}`, type: "function_call", call_id: part.id, name: part.name, arguments: JSON.stringify(part.params ?? {}), status: "completed" })
      } else if (part.type === "tool-result") {
        const output = typeof part.result === "string" ? part.result : JSON.stringify(part.result)
        items.push({ id: `fco_t${turn}_${part.id}`, type: "function_call_output", call_id: part.id, output, status: "completed" })
      }
    }
    return items
  })

/** Input items as a run's history and message (the last item: the user's message, or a function call's output). */
export const conversationOf = (
  input: ResponsePayload["input"],
  instructions: string | null | undefined,
  earlier: ReadonlyArray<Prompt.MessageEncoded>
) =>
  Effect.gen(function*() {
    const items: ReadonlyArray<InputItem> = typeof input === "string" ? [{ role: "user", content: input }] : input
    const history: Array<Prompt.MessageEncoded> = []
    if (instructions != null && instructions.length > 0) history.push({ role: "system", content: instructions })
    // A function_call_output answers a call of this input or of the conversation it continues.
    const called = new Map<string, string>()
    for (const message of earlier) {
      if (message.role !== "assistant" || typeof message.content === "string") continue
      for (const part of message.content as ReadonlyArray<{ type: string; id?: string; name?: string }>) {
        if (part.type === "tool-call" && part.id !== undefined && part.name !== undefined) called.set(part.id, part.name)
      }
    }
    for (const [index, item] of items.entries()) {
      const type = item.type ?? "message"
      if (type === "message") {
        if (item.role === undefined) return yield* invalid(`input[${index}].role`, "is missing")
        const parts = typeof item.content === "string" ? [{ type: "input_text", text: item.content }] : item.content ?? []
        const texts: Array<string> = []
        for (const [at, part] of parts.entries()) {
          if (!TEXT_PARTS.has(part.type)) {
            return yield* invalid(`input[${index}].content[${at}]`, `only text parts are supported, not ${part.type}`)
          }
          texts.push(part.text ?? "")
        }
        const text = texts.join("")
        if (item.role === "system" || item.role === "developer") history.push({ role: "system", content: text })
        else if (item.role === "user") history.push({ role: "user", content: [{ type: "text", text }] })
        else if (text.length > 0) history.push({ role: "assistant", content: [{ type: "text", text }] })
      } else if (type === "function_call") {
        if (item.call_id === undefined || item.name === undefined) {
          return yield* invalid(`input[${index}]`, "a function_call needs call_id and name")
        }
        let params: unknown
        try {
          params = JSON.parse(item.arguments !== undefined && item.arguments.length > 0 ? item.arguments : "{}")
        } catch {
          return yield* invalid(`input[${index}].arguments`, "is not JSON")
        }
        called.set(item.call_id, item.name)
        const part: Prompt.ToolCallPartEncoded = { type: "tool-call", id: item.call_id, name: item.name, params, providerExecuted: false }
        const previous = history[history.length - 1]
        if (previous?.role === "assistant") (previous.content as Array<unknown>).push(part)
        else history.push({ role: "assistant", content: [part] })
      } else if (type === "function_call_output") {
        const name = item.call_id === undefined ? undefined : called.get(item.call_id)
        if (name === undefined) {
          return yield* invalid(`input[${index}].call_id`, "answers no function_call of an earlier input item")
        }
        const output = typeof item.output === "string" ? item.output : (item.output ?? []).map((part) => part.text ?? "").join("")
        const part = { type: "tool-result", id: item.call_id!, name, isFailure: false, result: output, providerExecuted: false } as const
        const previous = history[history.length - 1]
        if (previous?.role === "tool") (previous.content as Array<unknown>).push(part)
        else history.push({ role: "tool", content: [part] })
      } else {
        return yield* invalid(`input[${index}].type`, `${type} items are not supported (send messages, function_call and function_call_output items)`)
      }
    }
    const last = items[items.length - 1]!
    if ((last.type ?? "message") === "function_call_output") return { history, message: "", resume: true }
    const lastMessage = history[history.length - 1]
    if ((last.type ?? "message") !== "message" || last.role !== "user" || lastMessage?.role !== "user") {
      return yield* invalid("input", "the last item must be a user message or a function_call_output")
    }
    const message = (lastMessage.content as unknown as Array<{ text: string }>).map((part) => part.text).join("")
    if (message.length === 0) return yield* invalid(`input[${items.length - 1}].content`, "is empty")
    return { history: history.slice(0, -1), message, resume: false }
  })

export class Responses extends Effect.Service<Responses>()("atrium/responses/Responses", {
  effect: Effect.gen(function*() {
    const runs = yield* Runs
    const sessions = yield* Sessions
    const repo = yield* ResponsesRepo
    const knowledge = yield* KnowledgeRepo
    const background = yield* BackgroundRuns
    const records = yield* RunRecords

    const notFound = (id: ResponseId) => new NotFound({ message: `No response ${id}.` })

    const refuseUnsupported = (caller: CallerIdentity, payload: ResponsePayload) =>
      Effect.gen(function*() {
        // OpenAI's rule: a background response is stored (it is read back by `retrieve`), so `store: false` cannot be one.
        if (payload.background === true && payload.store === false) {
          return yield* invalid("background", "a background response is stored: background and store: false cannot go together")
        }
        for (const [index, tool] of (payload.tools ?? []).entries()) {
          if (tool.type === "file_search") {
            const ids = tool.vector_store_ids ?? []
            if (ids.length === 0) return yield* invalid(`tools[${index}].vector_store_ids`, "name at least one vector store")
            const found = yield* knowledge.existing(ownedBy(caller), ids)
            const missing = ids.filter((id) => !found.includes(id))
            if (missing.length > 0) return yield* invalid(`tools[${index}].vector_store_ids`, `no vector store ${missing.join(", ")} of yours`)
            continue
          }
          if (tool.type !== "function") return yield* invalid(`tools[${index}].type`, `only function and file_search tools are supported, not ${tool.type}`)
          if (tool.name === undefined) return yield* invalid(`tools[${index}].name`, "is missing")
        }
        if (payload.previous_response_id != null && payload.conversation != null) {
          return yield* invalid("conversation", "give previous_response_id or conversation, not both")
        }
      })

    /**
     * Creates a response: the events of its run as they come, and the response object (complete once the events
     * have been read to their end). The response is stored before its first event.
     */
    const create = Effect.fn("Responses.create")(function*(caller: CallerIdentity, payload: ResponsePayload) {
      yield* refuseUnsupported(caller, payload)
      const outputFormat = yield* Either.match(fromTextFormat(payload.text?.format), {
        onLeft: (problem) => Effect.fail(invalid(problem.param, problem.message)),
        onRight: Effect.succeed
      })
      const partition = ownedBy(caller)
      const previous = payload.previous_response_id == null
        ? Option.none()
        : Option.some(Option.getOrElse(yield* repo.byId(partition, payload.previous_response_id), () => undefined))
      if (Option.isSome(previous) && previous.value === undefined) {
        return yield* invalid("previous_response_id", `no response ${payload.previous_response_id} of yours`)
      }
      let previousRow = Option.getOrUndefined(previous)
      if (previousRow !== undefined && isBackground(previousRow)) {
        // Its conversation is written once its run has ended; one still running has no answer to go on from.
        const state = yield* settle(previousRow)
        if (!state.ended) return yield* invalid("previous_response_id", `the response ${previousRow.id} is still ${state.body.status as string}`)
        previousRow = Option.getOrElse(yield* repo.byId(partition, previousRow.id), () => previousRow!)
      }
      let earlier: ReadonlyArray<Prompt.MessageEncoded> = (previousRow?.messages as Array<Prompt.MessageEncoded> | null) ?? []
      // An `item_reference` (what the AI SDK sends for items of a stored response) is the item it names.
      const input: ResponsePayload["input"] = typeof payload.input === "string"
        ? payload.input
        : yield* Effect.forEach(payload.input, (item, index) =>
          item.type !== "item_reference"
            ? Effect.succeed(item)
            : Effect.flatMap(repo.item(partition, ResponseItemId.make(item.id ?? "")), (found) =>
              Option.isNone(found)
                ? Effect.fail(invalid(`input[${index}].id`, `no output item ${item.id} of your responses`))
                : Effect.succeed(found.value as InputItem)))
      let conversation = yield* conversationOf(input, payload.instructions, earlier)
      const conversationId = payload.conversation == null
        ? undefined
        : typeof payload.conversation === "string" ? payload.conversation : payload.conversation.id
      // A structured answer is asked of one run: like the caller's tools, it keeps the conversation with the response.
      const hasTools = (payload.tools ?? []).length > 0 || outputFormat !== undefined
      const singleMessage = !conversation.resume && conversation.history.length === 0

      // Which conversation: an existing session, a new one, or one kept with the response.
      let sessionId: SessionId | null = previousRow?.sessionId ?? conversationId ?? null
      // `previous_response_id` is a branch point, as OpenAI has it (docs/sessions.md "Branches"): the new response
      // continues that response's turn, a sibling of any other child of it (a retry after a timeout makes a sibling,
      // not a second turn on the same line). `conversation` continues the session's current leaf.
      const branchFrom = previousRow?.sessionId != null && previousRow.turn !== null ? previousRow.turn : undefined
      const missing = () => invalid(conversationId !== undefined ? "conversation" : "previous_response_id", `no conversation ${sessionId}`)
      // A background response runs as a background run, which is stateless: an agent's session goes on from its
      // history, kept with the response from here (docs/runs.md "background: true on /v1/responses").
      const inBackground = payload.background === true
      if (sessionId !== null && (!singleMessage || hasTools || inBackground)) {
        // New instructions, tools, a format or items a session turn cannot carry: the conversation goes on from the
        // session's history statelessly, kept with the response from here (the session keeps its turns so far).
        earlier = yield* sessions.history(caller, sessionId, branchFrom).pipe(Effect.catchTag("NotFound", () => Effect.fail(missing())))
        conversation = yield* conversationOf(input, payload.instructions, earlier)
        sessionId = null
      }
      if (sessionId !== null) {
        yield* sessions.get(caller, sessionId).pipe(Effect.catchTag("NotFound", () => Effect.fail(missing())))
      }
      const agent = sessionId === null ? yield* runs.agentOrModel(payload.model, caller) : undefined
      const tools = agent === undefined
        ? { clientTools: [], toolChoice: undefined }
        : yield* clientToolsOf({
          tools: (payload.tools ?? []).filter((tool) => tool.type === "function").map((tool) => ({
            type: "function" as const,
            function: { name: tool.name!, description: tool.description ?? undefined, parameters: tool.parameters ?? undefined }
          })),
          tool_choice: payload.tool_choice == null
            ? payload.tool_choice
            : typeof payload.tool_choice === "string"
            ? payload.tool_choice
            : { type: "function" as const, function: { name: payload.tool_choice.name } }
        }, agent)
      if (sessionId === null && previousRow === undefined && agent !== undefined && agent.id !== null && singleMessage && !hasTools && payload.store !== false && !inBackground) {
        sessionId = (yield* sessions.create(caller, { agent: agent.identifier })).id
      }

      const fileSearch = fileSearchOf(payload.tools ?? [])
      const id = ResponseId.random()
      const builder = new ResponseBuilder({
        id,
        model: payload.model,
        createdAt: Math.floor(Date.now() / 1000),
        previousResponseId: payload.previous_response_id ?? null,
        conversation: sessionId,
        clientTools: new Set(tools.clientTools.map((tool) => tool.name)),
        fileSearch: fileSearch === undefined ? undefined : { includeResults: (payload.include ?? []).includes("file_search_call.results") },
        extra: {
          instructions: payload.instructions ?? null,
          tools: payload.tools ?? [],
          tool_choice: payload.tool_choice ?? "auto",
          parallel_tool_calls: payload.parallel_tool_calls ?? true,
          metadata: payload.metadata ?? {},
          temperature: payload.temperature ?? null,
          top_p: payload.top_p ?? null,
          max_output_tokens: payload.max_output_tokens ?? null,
          store: payload.store ?? true,
          text: { format: toTextFormat(outputFormat) },
          truncation: "disabled",
          background: inBackground
        },
        background: inBackground
      })
      yield* repo.insert({ id, partition, sessionId, body: builder.snapshot(), input: storedItems(input), runId: inBackground ? runIdOf(id) : null })

      if (inBackground) {
        // Queued as a background run (runs/Background.ts, the one road for every background run): its events go to
        // the run's log, and every read of the response folds that log again (`settle`, `events`).
        const stored: StoredResponse = {
          id,
          model: payload.model,
          createdAt: builder.base.createdAt,
          previousResponseId: builder.base.previousResponseId,
          clientTools: [...builder.base.clientTools],
          fileSearch: builder.base.fileSearch,
          extra: builder.base.extra
        }
        const request: StoredRequest = {
          message: conversation.message,
          history: [...earlier, ...conversation.history],
          budget: null,
          resume: conversation.resume,
          clientTools: tools.clientTools,
          toolChoice: tools.toolChoice,
          outputFormat,
          knowledge: fileSearch,
          response: stored
        }
        yield* Effect.orDie(background.start(caller, agent!, request, runIdOf(id)))
        return { _tag: "Queued", id, body: builder.snapshot() } as const
      }

      let events: Stream.Stream<InternalEvent>
      let history: ReadonlyArray<Prompt.MessageEncoded> = []
      if (sessionId !== null) {
        events = yield* sessions.sendStream(
          caller,
          sessionId,
          conversation.message,
          { budget: Option.none(), ...(branchFrom === undefined ? {} : { parent: branchFrom }) },
          (turn) => repo.setTurn(id, turn)
        ).pipe(Effect.catchTag("SessionBusy", Effect.die)) // sent with no strategy: it waits its turn, never refused
      } else {
        history = [...earlier, ...conversation.history]
        const request: RunRequest = {
          ...runs.request(caller, agent!, conversation.message, { history }),
          clientTools: tools.clientTools,
          toolChoice: tools.toolChoice,
          knowledge: fileSearch,
          outputFormat,
          resume: conversation.resume
        }
        events = runs.stream(request)
      }
      const keep = sessionId === null
      const frames: Stream.Stream<Frame> = events.pipe(
        Stream.mapEffect((event) => {
          const told = builder.on(event)
          if (event.type !== "complete" && event.type !== "error") return Effect.succeed(told)
          const messages = keep ? builder.messagesAfter(history, conversation.message, conversation.resume) : null
          return Effect.as(repo.finish(id, event.type === "complete" ? "completed" : "failed", builder.snapshot(), messages), told)
        }),
        Stream.flattenIterables,
        Stream.prepend(Chunk.unsafeFromArray(builder.start())),
        // A stream cut before its end (the client left a stateless run, which stops it) is a cancelled response.
        Stream.ensuring(Effect.suspend(() => builder.status === "in_progress" ? Effect.asVoid(repo.cancel(id, { ...builder.snapshot(), status: "cancelled" })) : Effect.void))
      )
      return { _tag: "Streaming", id, frames, builder } as const
    })

    /**
     * A background response as it is now, folded from its run's log (the same fold on any runner, so its item ids and
     * sequence numbers never change): `queued`, `in_progress` with the output so far, or its end. The first read
     * after the run ended writes the response's end and conversation (for `previous_response_id`), once.
     */
    const settle = (row: ResponseRow) =>
      Effect.gen(function*() {
        if (row.status !== "in_progress") return { body: row.body as Record<string, unknown>, ended: true }
        const runId = runIdOf(row.id)
        const found = yield* records.background(runId)
        if (Option.isNone(found)) return { body: row.body as Record<string, unknown>, ended: false }
        const run = found.value
        const stored = run.request as StoredRequest
        const builder = builderOf(stored.response as StoredResponse)
        const ended = TERMINAL.has(run.status)
        for (let after = 0;;) {
          const rows = yield* records.eventsAfter(runId, after)
          for (const event of rows) builder.on(event.payload as InternalEvent)
          if (rows.length === 0) break
          after = rows[rows.length - 1]!.seq
        }
        const body = builder.snapshot()
        if (!ended) return { body: { ...body, status: run.status === "queued" ? "queued" : "in_progress" }, ended }
        const status = wireStatus(run.status)
        const failed = yield* records.byId({ accountId: run.accountId, endUserId: run.endUserId }, runId)
        const failure = Option.getOrUndefined(failed)
        const final = {
          ...body,
          status,
          error: status === "failed" && body.error === null ? runError(failure?.failureCode ?? "internal_error", failure?.failureMessage ?? "") : body.error,
          incomplete_details: status === "incomplete" ? { reason: failure?.incompleteReason ?? "max_duration" } : body.incomplete_details
        }
        const messages = status === "completed" ? builder.messagesAfter(stored.history, stored.message, stored.resume === true) : null
        yield* repo.finish(row.id, status === "queued" || status === "in_progress" ? "failed" : status, final, messages)
        return { body: final as Record<string, unknown>, ended }
      })

    /** A response as `GET /v1/responses/:id` answers it (a background one as it is now). */
    const read = Effect.fn("Responses.read")(function*(caller: CallerIdentity, id: ResponseId) {
      const row = yield* retrieve(caller, id)
      return isBackground(row) ? (yield* settle(row)).body : row.body
    })

    /**
     * A background response's stream (`GET /v1/responses/:id?stream=true`), after `startingAfter`: its run's log
     * folded into OpenAI's events from the start, so each event has the same `sequence_number` on every read and any
     * runner; live while the run goes on, to its end. A foreground response's events went to its own stream.
     */
    const events = Effect.fn("Responses.events")(function*(caller: CallerIdentity, id: ResponseId, startingAfter: number) {
      const row = yield* retrieve(caller, id)
      if (!isBackground(row)) {
        return yield* invalid("stream", "only a background response's events are kept; this response told them on its own stream")
      }
      const runId = runIdOf(id)
      const run = yield* Effect.orDie(background.get(ownedBy(caller), runId))
      const found = yield* records.background(runId)
      if (Option.isNone(found)) return yield* notFound(id)
      const builder = builderOf((found.value.request as StoredRequest).response as StoredResponse)
      return Stream.suspend(() => Stream.fromIterable(builder.start())).pipe(
        Stream.concat(Stream.mapConcat(background.events(run, 0), ({ payload }) => builder.on(payload as InternalEvent))),
        Stream.filter((frame) => (frame.sequence_number as number) > startingAfter)
      )
    })

    const retrieve = Effect.fn("Responses.retrieve")(function*(caller: CallerIdentity, id: ResponseId) {
      const row = yield* repo.byId(ownedBy(caller), id)
      if (Option.isNone(row)) return yield* notFound(id)
      return row.value
    })

    const cancel = Effect.fn("Responses.cancel")(function*(caller: CallerIdentity, id: ResponseId) {
      const row = yield* retrieve(caller, id)
      if (isBackground(row)) {
        // Idempotent, as OpenAI's: a response that ended (cancelled or not) is answered as it is. One in progress is
        // asked to stop (its run stops within BACKGROUND_CANCEL_POLL, at once on this runner) and answered once it
        // has, within 2 s, so the answer says `cancelled`.
        const now = yield* settle(row)
        if (now.ended) return now.body
        yield* Effect.orDie(background.cancel(ownedBy(caller), runIdOf(id)))
        for (let waited = 0; waited < 20; waited++) {
          const run = yield* records.background(runIdOf(id))
          if (Option.isNone(run) || TERMINAL.has(run.value.status)) break
          yield* Effect.sleep("100 millis")
        }
        return yield* read(caller, id)
      }
      if (row.status !== "in_progress") return row.body
      const body = { ...(row.body as Record<string, unknown>), status: "cancelled" }
      if (yield* repo.cancel(id, body)) {
        if (row.sessionId !== null) yield* Effect.ignore(sessions.interrupt(caller, row.sessionId))
        return body
      }
      return (yield* retrieve(caller, id)).body
    })

    /** Deletes a response (OpenAI's `responses.delete`); one in progress in a session is stopped first. */
    const remove = Effect.fn("Responses.remove")(function*(caller: CallerIdentity, id: ResponseId) {
      const row = yield* retrieve(caller, id)
      if (row.status === "in_progress") yield* cancel(caller, id)
      if (!(yield* repo.remove(ownedBy(caller), id))) return yield* notFound(id)
      return { id, object: "response" as const, deleted: true as const }
    })

    /**
     * The input items of a response (`input_items`): for a response of a session, the conversation on its branch before
     * its turn (the path from the root to its parent turn) and then its own input, as OpenAI lists a chained response's.
     */
    const inputItems = Effect.fn("Responses.inputItems")(function*(caller: CallerIdentity, id: ResponseId) {
      const row = yield* retrieve(caller, id)
      const own = row.input as Array<{ id: string }>
      if (row.sessionId === null || row.turn === null) return own
      const before = yield* sessions.turnsBefore(caller, row.sessionId, row.turn).pipe(
        Effect.catchTag("NotFound", () => Effect.succeed([]))
      )
      return [...before.flatMap((turn) => itemsOfTurn(turn.turn, turn.messages)), ...own]
    })

    return { create, retrieve, read, events, cancel, remove, inputItems } as const
  }),
  dependencies: [Runs.Default, Sessions.Default, ResponsesRepo.Default, KnowledgeRepo.Default, BackgroundRuns.Default, RunRecords.Default]
}) {}
