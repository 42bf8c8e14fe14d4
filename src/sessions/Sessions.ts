import type * as Prompt from "@effect/ai/Prompt"
import { Effect, Exit, Layer, Option, Queue, Schema, Scope, Stream } from "effect"
import * as Crypto from "node:crypto"
import { IdempotencyRepo } from "../platform/http/Repo.js"
import { EnvironmentsRepo } from "../environments/Repo.js"
import { makeEntityCaller } from "../platform/Cluster.js"
import { InvalidRequest, NotFound, ServiceUnavailable } from "../platform/Errors.js"
import { RETRY_AFTER_SECONDS } from "../platform/Outage.js"
import type { Micros } from "../platform/Money.js"
import { Approvals } from "../runtime/Approvals.js"
import type { ApprovalId, RunId } from "../runtime/Domain.js"
import { RunsRepo } from "../runtime/Repo.js"
import { Runs } from "../runs/Runs.js"
import { RunRecords, TERMINAL } from "../runs/Repo.js"
import { TurnCancels } from "../runs/Lifecycle.js"
import { turnRunId } from "./Rows.js"
import { SessionFollow, type SessionEvent, type SessionSink } from "./Follow.js"
import { SessionsRepo } from "./Repo.js"
import { messageView, preview, sessionView } from "./Views.js"
import { messagesOf, pathTo, treeView, userMessageOf } from "./Tree.js"
import { type Partition, partitionOf } from "../identity/Partition.js"
import { type EnvironmentId, SessionId } from "../platform/Ids.js"
import { MAX_ATTACHMENTS_PER_SESSION, type MultitaskStrategy, SessionBusy } from "./Domain.js"
import { IdempotencyConflict } from "../billing/Domain.js"
import type { CallerIdentity } from "../identity/Domain.js"
import { Session } from "./SessionRpc.js"
import { isOwner, ownedBy } from "./Policy.js"
import { allowed } from "../platform/Policy.js"


/** How long a message's `Idempotency-Key` names its turn (as a create's key, Idempotency.ts). */
const KEY_KEPT = "24 hours"
/** A request that claimed a key and died before its turn was numbered frees it after this. */
const KEY_CLAIMED = "1 minute"
/** How long a retry waits for the first request to number its turn before it is told to retry (409). */
const CLAIM_WAIT_MS = 5_000

const sha256 = (text: string) => Crypto.createHash("sha256").update(text).digest("base64url")

const KeyRecord = Schema.parseJson(Schema.Union(
  Schema.Struct({ state: Schema.Literal("claimed"), fingerprint: Schema.String }),
  Schema.Struct({ state: Schema.Literal("turn"), fingerprint: Schema.String, turn: Schema.Number })
))
const decodeKeyRecord = Schema.decodeUnknownOption(KeyRecord)

/** Where a message sent in the background goes: nowhere; nothing follows its turn (its events are in the log). */
const detached: SessionSink = { event: () => {}, end: () => {} }

const optionsOf = (how: SendOptions | Option.Option<Micros>): SendOptions => Option.isOption(how) ? { budget: how } : how

/** How a message is sent: its credit cap, the turn it continues (a branch), what it does while a turn runs. */
export interface SendOptions {
  readonly budget: Option.Option<Micros>
  /** The turn it answers after (null: a new first turn); absent: the session's leaf when it runs. */
  readonly parent?: number | null | undefined
  /** Double-texting (docs/sessions.md); absent: `enqueue`. */
  readonly strategy?: MultitaskStrategy | undefined
}

/**
 * Sessions as the API offers them (spec 4.2): create, list, read, delete, send a message or an approval and stream
 * that turn, interrupt, adopt, subscribe. A session belongs to an account and one of its end users (`''` for a
 * caller acting for itself); anyone else gets 404 for it. The turns themselves run in the Session entity.
 */
export class Sessions extends Effect.Service<Sessions>()("atrium/sessions/Sessions", {
  scoped: Effect.gen(function*() {
    const repo = yield* SessionsRepo
    const runs = yield* Runs
    const approvals = yield* Approvals
    const environments = yield* EnvironmentsRepo
    const workspace = yield* RunsRepo
    const records = yield* RunRecords
    const client = yield* Session.client
    /** Message keys (`Idempotency-Key`) in PostgreSQL, with the creates': any runner resolves a retry's key. */
    const keys = yield* IdempotencyRepo
    /** Session messages leave from this service's fibers, so an active session does not keep a request alive. */
    const toEntity = yield* makeEntityCaller
    const { follower, followLog, followLoggedTurn, followTurn, wakeBeforeRead } = yield* SessionFollow

    const notFound = (id: SessionId) => new NotFound({ message: `No session ${id}.` })

    /** The session if the caller's partition owns it; 404 whether it is someone else's or does not exist. */
    const owned = (caller: CallerIdentity, id: SessionId) =>
      Effect.gen(function*() {
        const partition = ownedBy(caller)
        return yield* allowed(yield* repo.byId(id), (session) => isOwner(partition, session), () => notFound(id))
      })

    const create = Effect.fn("Sessions.create")(function*(caller: CallerIdentity, body: {
      readonly agent: string
      readonly environment_id?: EnvironmentId | undefined
      readonly title?: string | undefined
      readonly metadata?: Record<string, unknown> | undefined
    }) {
      const partition = partitionOf(caller)
      const agent = yield* runs.agentFor(body.agent, caller)
      if (body.environment_id !== undefined) {
        const environment = yield* environments.byId(partition, body.environment_id)
        if (Option.isNone(environment)) return yield* new NotFound({ message: `No environment ${body.environment_id}.` })
      }
      const id = SessionId.random()
      // A bare model has no agent row; sessions are for agents (`/v1/chat/completions` serves bare models).
      if (agent.id === null) return yield* new NotFound({ message: `No agent ${body.agent}.` })
      yield* repo.insert({
        id,
        agentId: agent.id,
        partition,
        environmentId: body.environment_id ?? null,
        title: body.title ?? null,
        metadata: body.metadata ?? {}
      })
      return sessionView(Option.getOrThrow(yield* repo.byId(id)))
    })

    const list = Effect.fn("Sessions.list")(function*(
      caller: CallerIdentity,
      limit: number,
      after: Option.Option<SessionId>,
      search: Option.Option<string> = Option.none()
    ) {
      const partition = partitionOf(caller)
      const cursor = yield* Option.match(after, {
        onNone: () => Effect.succeed(Option.none<{ createdAt: Date; id: SessionId }>()),
        onSome: (id) => Effect.map(owned(caller, id), (row) => Option.some({ createdAt: row.createdAt, id: row.id }))
      })
      const rows = yield* repo.list(partition, limit, cursor, search)
      const shown = rows.slice(0, limit)
      const lastTurns = yield* repo.lastTurns(shown.map((row) => row.id))
      return {
        data: shown.map((row) => ({ ...sessionView(row), last_message: preview(lastTurns.get(row.id) ?? []) })),
        has_more: rows.length > limit
      }
    })

    /** The caller's session, woken (its cut turn closed), and its tree: its row and its turns as one moment had them. */
    const withTree = (caller: CallerIdentity, id: SessionId) =>
      Effect.gen(function*() {
        yield* owned(caller, id)
        yield* wakeBeforeRead(id)
        return yield* repo.inOneSnapshot(Effect.all([owned(caller, id), repo.tree(id)]))
      })

    const get = Effect.fn("Sessions.get")(function*(caller: CallerIdentity, id: SessionId) {
      const [session, tree] = yield* withTree(caller, id)
      // The branch the session is on: the path from the root to its leaf.
      const path = pathTo(tree, session.leafTurn)
      return { ...sessionView(session), leaf: session.leafTurn, messages: path.flatMap((turn) => turn.messages.map(messageView(turn.turn))) }
    })

    /** Every turn of the session with its parent and children, and the current leaf (docs/sessions.md "Branches"). */
    const tree = Effect.fn("Sessions.tree")(function*(caller: CallerIdentity, id: SessionId) {
      const [session, found] = yield* withTree(caller, id)
      return treeView(found, session.leafTurn)
    })

    const noTurn = (id: SessionId, turn: number) => new NotFound({ message: `No turn ${turn} in session ${id}.` })

    /** The session if the caller owns it and its tree has `turn`; the same 404s as `owned`, or one for the turn. */
    const ownedTurn = (caller: CallerIdentity, id: SessionId, turn: number) =>
      Effect.gen(function*() {
        const session = yield* owned(caller, id)
        if (!(yield* repo.hasTurn(id, turn))) return yield* noTurn(id, turn)
        return session
      })

    /**
     * Switches the session's branch: `leaf` becomes the current leaf (with `newest`, the newest leaf under it). Refused
     * while a turn runs or waits (409 `session_busy`): that turn's end moves the leaf.
     */
    const switchLeaf = Effect.fn("Sessions.switchLeaf")(function*(caller: CallerIdentity, id: SessionId, leaf: number | null) {
      yield* owned(caller, id)
      if (leaf !== null && !(yield* repo.hasTurn(id, leaf))) return yield* noTurn(id, leaf)
      const switched = yield* toEntity(client(id).SetLeaf({ leaf })).pipe(
        Effect.catchAll((error) => error._tag === "SessionGone" ? Effect.fail(notFound(id)) : Effect.die(error))
      )
      if (!switched) return yield* new SessionBusy({ message: "A turn is running or waiting in this session; switch branches when it is idle." })
      return sessionView(Option.getOrThrow(yield* repo.byId(id)))
    })

    /**
     * A new session that shares this one's history up to `turn` (docs/sessions.md "Branches"): it points at its origin,
     * nothing is copied; its own turns are numbered after `turn`. Answered as `POST /v1/sessions` answers.
     */
    const fork = Effect.fn("Sessions.fork")(function*(caller: CallerIdentity, id: SessionId, turn: number) {
      const session = yield* ownedTurn(caller, id, turn)
      const forked = SessionId.random()
      yield* repo.fork({ id: forked, from: id, turn, accountId: session.accountId, endUserId: session.endUserId })
      return sessionView(Option.getOrThrow(yield* repo.byId(forked)))
    })

    /** The message and parent of a regenerated turn: its user's message again, as a sibling (same parent). */
    const regeneration = Effect.fn("Sessions.regeneration")(function*(caller: CallerIdentity, id: SessionId, turn: number) {
      yield* owned(caller, id)
      const found = (yield* repo.tree(id)).turns.get(turn)
      if (found === undefined) return yield* noTurn(id, turn)
      const message = userMessageOf(found)
      if (message === undefined || message === "") {
        return yield* new InvalidRequest({ message: `Invalid request: turn: turn ${turn} has no message to answer again.`, param: "turn" })
      }
      return { message, parent: found.parentTurn }
    })

    /** Renames a session (the web app's conversation list shows the title); an empty title clears it. */
    const rename = Effect.fn("Sessions.rename")(function*(caller: CallerIdentity, id: SessionId, title: string) {
      yield* owned(caller, id)
      yield* repo.setTitle(id, title.trim() === "" ? null : title.trim())
      return sessionView(Option.getOrThrow(yield* repo.byId(id)))
    })

    /**
     * The conversation as the model sees it, up to `upto` (a turn) or the session's leaf: a Responses request that goes
     * on from it statelessly, and its `input_items`.
     */
    const history = Effect.fn("Sessions.history")(function*(caller: CallerIdentity, id: SessionId, upto?: number | null) {
      const session = yield* owned(caller, id)
      const path = pathTo(yield* repo.tree(id), upto === undefined ? session.leafTurn : upto)
      return messagesOf(path) as ReadonlyArray<Prompt.MessageEncoded>
    })

    /** The turns on the path before `turn` (from the root to its parent); none while it has not ended. */
    const turnsBefore = Effect.fn("Sessions.turnsBefore")(function*(caller: CallerIdentity, id: SessionId, turn: number) {
      yield* owned(caller, id)
      const found = yield* repo.tree(id)
      const node = found.turns.get(turn)
      return node === undefined ? [] : pathTo(found, node.parentTurn)
    })

    const remove = Effect.fn("Sessions.remove")(function*(caller: CallerIdentity, id: SessionId) {
      const session = yield* owned(caller, id)
      yield* toEntity(client(id).Stop()).pipe(Effect.orDie)
      yield* repo.remove(session)
      // Its turns that had not ended will not: their runs end `cancelled` (a background message's run may be queued).
      yield* records.closeSession(session.id)
      return { id, deleted: true }
    })

    /** Sends a message: the turn waits behind any running one, and `sink` gets that turn only. */
    const send = Effect.fn("Sessions.send")(function*(
      caller: CallerIdentity,
      id: SessionId,
      message: string,
      /** How it is sent; a bare budget (as before branches) is a message on the leaf, queued. */
      sending_: SendOptions | Option.Option<Micros>,
      sink: SessionSink,
      /** Told the turn's number once the session has accepted it (and before its events are delivered). */
      onTurn?: (turn: number) => Effect.Effect<void>
    ) {
      const how = optionsOf(sending_)
      yield* owned(caller, id)
      // A branch continues a turn of the session's tree (a fork's shared turns included).
      if (typeof how.parent === "number" && !(yield* repo.hasTurn(id, how.parent))) {
        return yield* new InvalidRequest({ message: `Invalid request: parent_turn: no turn ${how.parent} in session ${id}.`, param: "parent_turn" })
      }
      const follow = sink === detached ? undefined : yield* followTurn(id, sink, { sending: true })
      const sending = toEntity(client(id).Send({
        message,
        budget: Option.getOrNull(how.budget),
        // A stream here follows the turn: told to this runner if the session's owner is another.
        ...(follow === undefined || follower === undefined ? {} : { follower }),
        ...(how.parent === undefined ? {} : { parent: how.parent }),
        ...(how.strategy === undefined ? {} : { strategy: how.strategy })
      })).pipe(
        // The session went away between the check and the send: 404; busy under `reject`: 409. The cluster's own
        // failures are ours: a 500.
        Effect.catchAll((error): Effect.Effect<never, NotFound | SessionBusy> =>
          error._tag === "SessionGone"
            ? Effect.fail(notFound(id))
            : error._tag === "SessionBusy"
            ? Effect.fail(error)
            : Effect.die(error)
        ),
        Effect.tap((sent) => onTurn === undefined ? Effect.void : onTurn(sent.turn))
      )
      // With a key, a client that leaves does not cut the send short: the session may have taken the message, and
      // the key must learn its turn (the entity call has its deadline, so this wait has an end).
      const sent = yield* onTurn === undefined ? sending : Effect.uninterruptible(sending)
      if (follow !== undefined) yield* follow(Option.some(sent.turn))
      return sent.turn
    })

    /**
     * `send` under an `Idempotency-Key` (docs/sessions.md, Safe retries). The key names the turn the first request
     * sent, in PostgreSQL (`idempotency_keys`, with the creates' keys), so a retry on any runner finds it: it then
     * reads that turn from its first event in the session's log and follows it live to its end (a finished turn is
     * replayed whole), and sends nothing. The same key with another body is a 409 `idempotency_conflict`, as is a
     * retry that arrives while the first request has not yet had its turn numbered (after waiting up to 5 s for it).
     * Keys belong to the session's partition and the session. Answers whether the turn was the first request's.
     */
    const sendOnce = Effect.fn("Sessions.sendOnce")(function*(
      caller: CallerIdentity,
      id: SessionId,
      key: string,
      message: string,
      sending_: SendOptions | Option.Option<Micros>,
      sink: SessionSink
    ) {
      const how = optionsOf(sending_)
      yield* owned(caller, id)
      const partition = partitionOf(caller)
      const storeKey = `turn:${sha256(`${partition.accountId}\n${partition.endUserId}\n${id}`)}:${sha256(key)}`
      // The parent is part of the message: the same key sent under another branch is another request.
      const fingerprint = sha256(JSON.stringify(
        how.parent === undefined
          ? [message, Option.getOrNull(how.budget)?.toString() ?? null]
          : [message, Option.getOrNull(how.budget)?.toString() ?? null, how.parent]
      ))
      const deadline = Date.now() + CLAIM_WAIT_MS
      for (;;) {
        const claimed = yield* keys.setIfAbsent(storeKey, JSON.stringify({ state: "claimed", fingerprint }), KEY_CLAIMED)
        if (claimed) {
          let numbered = false
          const turn = yield* send(caller, id, message, how, sink, (turn) => {
            numbered = true
            return keys.set(storeKey, JSON.stringify({ state: "turn", fingerprint, turn }), KEY_KEPT)
          }).pipe(
            // Refused or cut before the session took the message: the key is free for a corrected retry.
            Effect.onExit((exit) => Exit.isSuccess(exit) || numbered ? Effect.void : keys.delete(storeKey))
          )
          return { first: true, turn }
        }
        const record = Option.flatMap(yield* keys.get(storeKey), decodeKeyRecord)
        // Freed meanwhile (the first request was refused): claim it again.
        if (Option.isNone(record)) continue
        if (record.value.fingerprint !== fingerprint) {
          return yield* new IdempotencyConflict({ message: "This Idempotency-Key was sent with a different message.", final: true })
        }
        if (record.value.state === "turn") {
          if (sink !== detached) yield* followLoggedTurn(id, record.value.turn, sink)
          return { first: false, turn: record.value.turn }
        }
        if (Date.now() >= deadline) {
          return yield* new IdempotencyConflict({ message: "A message with this Idempotency-Key is being sent; retry shortly." })
        }
        yield* Effect.sleep("50 millis")
      }
    })

    /**
     * A message sent in the background (`background: true`, docs/sessions.md): answered once the session has numbered
     * its turn, with the turn's run, `queued` until the turn starts (it waits behind any running one). The turn runs
     * in the session's entity as every turn does, whoever is connected; `GET /v1/runs/:id` and the session's events
     * tell it. With an `Idempotency-Key`, a retry answers the same turn's run (`first` false).
     */
    const sendInBackground = Effect.fn("Sessions.sendInBackground")(function*(
      caller: CallerIdentity,
      id: SessionId,
      message: string,
      how: SendOptions,
      key: string | undefined
    ) {
      const session = yield* owned(caller, id)
      const sent = key === undefined
        ? { first: true, turn: yield* send(caller, id, message, how, detached) }
        : yield* sendOnce(caller, id, key, message, how, detached)
      const runId = turnRunId(id, sent.turn)
      const partition = partitionOf(caller)
      yield* records.enqueueTurn({ id: runId, partition, agentId: session.agentId, agent: session.agentIdentifier, sessionId: session.id })
      const run = yield* records.byId(partition, runId)
      return { first: sent.first, turn: sent.turn, run: Option.getOrThrow(run) }
    })

    /** `send` as a pulled stream, for a reader that folds the turn into something else (the Responses API). */
    const sendStream = (
      caller: CallerIdentity,
      id: SessionId,
      message: string,
      how: SendOptions,
      onTurn?: (turn: number) => Effect.Effect<void>
    ) =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const queue = yield* Queue.unbounded<SessionEvent | null>()
        yield* send(caller, id, message, how, {
          event: (event) => Queue.unsafeOffer(queue, event),
          end: () => Queue.unsafeOffer(queue, null)
        }, onTurn).pipe(Scope.extend(scope), Effect.onError(() => Scope.close(scope, Exit.void)))
        return Stream.fromQueue(queue).pipe(
          Stream.takeWhile((event): event is SessionEvent => event !== null),
          Stream.ensuring(Scope.close(scope, Exit.void))
        )
      })

    /** Answers a pending approval of this session's turn; `sink` gets the rest of that turn. */
    const answerApproval = Effect.fn("Sessions.answerApproval")(function*(
      caller: CallerIdentity,
      id: SessionId,
      approvalId: ApprovalId,
      approved: boolean,
      reason: string,
      sink: SessionSink
    ) {
      const session = yield* owned(caller, id)
      const follow = yield* followTurn(id, sink)
      yield* approvals.answer({ accountId: session.accountId, endUserId: session.endUserId }, approvalId, { approved, reason }, Option.some(id))
      yield* follow(Option.none())
    })

    const interrupt = Effect.fn("Sessions.interrupt")(function*(caller: CallerIdentity, id: SessionId) {
      yield* owned(caller, id)
      // The turn in flight as the interrupt leaves, if any.
      const before = yield* repo.inFlight(id)
      const interrupted = yield* toEntity(client(id).Interrupt()).pipe(Effect.orDie)
      // The entity that answered runs no turn, yet a turn was in flight when the interrupt left, or is now: the session
      // is between runners, or the turn is ending. In a hand-over the message waits for the new owner, which takes
      // the session only once the old one finished the turn within its grace (the fault checker: answered 11 s later,
      // the turn completed and billed meanwhile). The interrupt did not reach it; "false" would tell the client
      // there was nothing to stop while the turn went on (issue 42 items 7 and 8). Retryable: the next try reaches
      // the turn, or finds it ended before it was sent and says false.
      if (!interrupted && (Option.isSome(before) || Option.isSome(yield* repo.inFlight(id)))) {
        return yield* new ServiceUnavailable({
          message: "The session is moving between runners and its running turn could not be reached; try again shortly.",
          retry_after: RETRY_AFTER_SECONDS
        })
      }
      return { interrupted }
    })

    /**
     * Cancels a session's turn by its run (`POST /v1/runs/:id/cancel`, issue 43): the running turn stops as
     * `interrupt` stops it (billed for the model calls it finished), a queued one ends in its place without running.
     * Idempotent: a run that ended is answered as it is. Answers the run once it has ended (waiting up to 2 s).
     */
    const cancelTurn = Effect.fn("Sessions.cancelTurn")(function*(caller: CallerIdentity, runId: RunId) {
      const partition = partitionOf(caller)
      const read = Effect.flatMap(records.byId(partition, runId), Option.match({
        onNone: () => Effect.fail(new NotFound({ message: `No run ${runId}.` })),
        onSome: Effect.succeed
      }))
      const run = yield* read
      if (run.sessionId === null) return yield* new InvalidRequest({ message: `The run ${runId} is not a session's turn.` })
      if (TERMINAL.has(run.status)) return run
      // Written first: a queued turn's cancel then holds even if the session moves to another runner before its place.
      yield* records.requestCancel(partition, runId)
      const reached = yield* toEntity(client(run.sessionId).CancelTurn({ runId })).pipe(Effect.orDie)
      let now = yield* read
      // Not the running turn nor a queued one of the entity that answered, yet the run has not ended: the session is
      // between runners (as for `interrupt`). Retryable: the next try reaches it, or finds it ended.
      if (!reached && !TERMINAL.has(now.status)) {
        return yield* new ServiceUnavailable({
          message: "The session is moving between runners and this turn could not be reached; try again shortly.",
          retry_after: RETRY_AFTER_SECONDS
        })
      }
      // The turn's end is written by the session's worker once the turn has stopped: polled, as only the row says it.
      for (let i = 0; i < 20 && !TERMINAL.has(now.status); i++) {
        yield* Effect.sleep("100 millis")
        now = yield* read
      }
      return now
    })

    /**
     * Binds a session of the caller's account to the caller's end user (docs/sessions.md): the account owns every
     * end user's data, so any of its callers may move a session between them; another account's session is 404.
     */
    const adopt = Effect.fn("Sessions.adopt")(function*(caller: CallerIdentity, id: SessionId) {
      const target: Partition = partitionOf(caller)
      const session = yield* repo.byId(id)
      if (Option.isNone(session) || session.value.accountId !== target.accountId) return yield* notFound(id)
      if (session.value.endUserId !== target.endUserId) {
        if (session.value.status !== "idle") {
          return yield* new SessionBusy({ message: "The session is running a turn; adopt it when it is idle." })
        }
        yield* repo.adopt(session.value.id, target.accountId, session.value.endUserId, target.endUserId)
        // The session keeps its row while active: its next turn must be paid and filed for the new end user.
        yield* toEntity(client(id).Reload()).pipe(Effect.orDie)
      }
      return sessionView(Option.getOrThrow(yield* repo.byId(id)))
    })

    /**
     * The session's events, to `sink`, for the life of the scope: first those after `after` from the log (or, without
     * it, the turn in flight from its `run.created`), then live ones, across turns, until the session is deleted.
     * The starting point is read before listening and the log after, so every event is either replayed or live;
     * `seq` drops duplicates. Nothing waits per subscription while the session is quiet: the hub calls `deliver`,
     * and a fiber runs only while the log is read (the replay, or a gap).
     */
    const subscribe = Effect.fn("Sessions.subscribe")(function*(
      caller: CallerIdentity,
      id: SessionId,
      after: Option.Option<number>,
      sink: SessionSink
    ) {
      yield* owned(caller, id)
      yield* wakeBeforeRead(id)
      const inFlight = Option.isSome(after) ? Option.none<number>() : yield* repo.inFlightStart(id)
      const start = Option.isSome(after)
        ? after.value
        : Option.isSome(inFlight)
        ? inFlight.value
        : (yield* repo.positions(id)).seq
      yield* followLog(id, start, Option.none(), sink)
    })

    /** The session's workspace (its turns' files), for its partition (the caller's: `owned`): what `list_files` shows. */
    const files = Effect.fn("Sessions.files")(function*(caller: CallerIdentity, id: SessionId) {
      yield* owned(caller, id)
      const listed = yield* workspace.listFiles(partitionOf(caller), id)
      return { data: listed.map((file) => ({ path: file.path, size: Number(file.size), updated_at: file.updatedAt.toISOString() })) }
    })

    /**
     * A text file the user attaches, into the session's workspace under `attachments/`. A name attached again is
     * replaced; a new name past the session's attachment limit is refused, and nothing is written.
     */
    const attach = Effect.fn("Sessions.attach")(function*(caller: CallerIdentity, id: SessionId, name: string, content: string) {
      yield* owned(caller, id)
      const path = `attachments/${name}`
      const attached = yield* workspace.filesUnder(partitionOf(caller), id, "attachments/", path)
      if (attached.count >= MAX_ATTACHMENTS_PER_SESSION && !attached.present) {
        return yield* new InvalidRequest({ message: `Invalid request: this conversation has ${MAX_ATTACHMENTS_PER_SESSION} attachments, the most it keeps; start a new one or attach under a name it has.` })
      }
      yield* workspace.writeFile(partitionOf(caller), id, path, content)
      return { path, size: content.length, updated_at: new Date().toISOString() }
    })

    const fileContent = Effect.fn("Sessions.fileContent")(function*(caller: CallerIdentity, id: SessionId, path: string) {
      yield* owned(caller, id)
      const content = yield* workspace.readFile(partitionOf(caller), id, path)
      if (Option.isNone(content)) return yield* new NotFound({ message: `No file ${path} in session ${id}.` })
      return content.value
    })

    const invalid = (message: string) => new InvalidRequest({ message })

    return {
      owned,
      attach,
      ownedTurn,
      create,
      list,
      get,
      tree,
      switchLeaf,
      fork,
      regeneration,
      rename,
      history,
      turnsBefore,
      remove,
      send,
      sendOnce,
      sendInBackground,
      sendStream,
      answerApproval,
      interrupt,
      cancelTurn,
      adopt,
      subscribe,
      files,
      fileContent,
      invalid
    } as const
  }),
  dependencies: [IdempotencyRepo.Default, RunRecords.Default, SessionsRepo.Default, SessionFollow.Default, Runs.Default, Approvals.Default, EnvironmentsRepo.Default, RunsRepo.Default]
}) {}

/** `POST /v1/runs/:id/cancel` of a session's turn (the runs module's port, `TurnCancels`), answered by the session. */
export const TurnCancelsLive = Layer.effect(TurnCancels, Effect.map(Sessions, (sessions) => TurnCancels.of({ cancel: sessions.cancelTurn })))
