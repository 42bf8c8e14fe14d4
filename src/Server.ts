import * as HttpLayerRouter from "@effect/platform/HttpLayerRouter"
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServer from "@effect/platform/HttpServer"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Duration, Effect, FiberRef, Layer, Option } from "effect"
import { createServer } from "node:http"
import { AgentsHttpLive } from "./agents/Http.js"
import { AtriumApi } from "./Api.js"
import { BillingHttp } from "./billing/Http.js"
import { RunPayerLive } from "./billing/RunPayerLive.js"
import { CredentialsHttpLive } from "./credentials/Http.js"
import { EnvironmentsHttpLive } from "./environments/Http.js"
import { FilesHttpLive } from "./files/Http.js"
import { KnowledgeHttpLive } from "./knowledge/Http.js"
import { KnowledgeSearchLive } from "./knowledge/KnowledgeSearchLive.js"
import { ExpertMemoryLive } from "./memory/ExpertMemoryLive.js"
import { MemoryExtractionLive } from "./memory/Extraction.js"
import { MemoryHttpLive } from "./memory/Http.js"
import { isStorageRoute, StorageRoute } from "./files/StorageHttp.js"
import { accountOf, missingEndUser } from "./identity/Authentication.js"
import { ApiKeys } from "./identity/ApiKeys.js"
import { AccountHttp, AuthHttp } from "./identity/Http.js"
import { fallbackLoginPage, OAuthRoutes } from "./identity/oauth/Http.js"
import { OAuth } from "./identity/oauth/OAuth.js"
import { Tokens } from "./identity/Tokens.js"
import { MarketHttpLive } from "./market/Http.js"
import { NotificationsHttpLive } from "./notifications/Http.js"
import { McpRoute } from "./mcp/Http.js"
import { ClusterLive } from "./platform/Cluster.js"
import { IdempotencyRepo } from "./platform/http/Repo.js"
import { AppConfig } from "./platform/Config.js"
import { DatabaseLive } from "./platform/Database.js"
import { HealthHttp } from "./platform/HealthHttp.js"
import { makeReferenceRoute } from "./platform/http/Reference.js"
import { makeEdge, methodsServed } from "./platform/http/Edge.js"
import { KeyValueLive } from "./platform/KeyValue.js"
import { accessLog } from "./platform/telemetry/AccessLog.js"
import { makeWebAppRoutes } from "./platform/WebApp.js"
import * as Sse from "./platform/sse/Sse.js"
import { ModelsHttp } from "./runtime/models/Http.js"
import { AgentModelsLive } from "./runs/AgentModels.js"
import { RunsHttpLive } from "./runs/Http.js"
import { TracesHttpLive } from "./traces/Http.js"
import { EvalsHttpLive } from "./evals/Http.js"
import { EvalDriverLive } from "./evals/Driver.js"
import { TraceWriterLive } from "./traces/Writer.js"
import { ResponsesHttpLive } from "./responses/Http.js"
import { EvolutionHttpLive } from "./evolution/Http.js"
import { DistillationsHttpLive } from "./distillation/Http.js"
import { SessionsHttpLive } from "./sessions/Http.js"
import { SessionLive } from "./sessions/Session.js"
import { RunnerTurns, TurnDrainLive } from "./sessions/Activation.js"
import { Stopping } from "./platform/Stopping.js"
import { WebhooksHttpLive } from "./webhooks/Http.js"
import { RunEndWebhooksLive } from "./webhooks/RunEnds.js"
import { Webhooks } from "./webhooks/Webhooks.js"
import { BackgroundRunLive, BackgroundRuns, BackgroundSweepLive } from "./runs/Background.js"
import { RunRecords } from "./runs/Repo.js"
import { Runs } from "./runs/Runs.js"
import { ScheduleFirerLive } from "./schedules/Fire.js"
import { SchedulesHttpLive } from "./schedules/Http.js"
import { SchedulerLive } from "./schedules/Scheduler.js"
import { Sessions, TurnCancelsLive } from "./sessions/Sessions.js"
import { LedgerReads } from "./billing/LedgerReads.js"
import { ClusterWorkflowEngine } from "@effect/cluster"
import { Wallets } from "./billing/Wallets.js"
import { WalletLive } from "./billing/WalletEntity.js"
import { WalletRelayLive } from "./billing/WalletRelay.js"
import { MISSING_END_USER } from "./identity/Domain.js"
import { AgentsConfig } from "./agents/Config.js"
import { BillingConfig } from "./billing/Config.js"
import { CredentialsConfig } from "./credentials/Config.js"
import { DistillationConfig } from "./distillation/Config.js"
import { EvalsConfig } from "./evals/Driver.js"
import { FilesConfig } from "./files/Config.js"
import { ChallengeConfig } from "./identity/Config.js"
import { KnowledgeConfig } from "./knowledge/Config.js"
import { MarketConfig } from "./market/Config.js"
import { McpConfig } from "./mcp/Config.js"
import { MemoryConfig } from "./memory/Config.js"
import { RunsConfig } from "./runs/Config.js"
import { ToolsConfig } from "./runtime/tools/Config.js"
import { SchedulesConfig } from "./schedules/Config.js"
import { SessionsConfig } from "./sessions/Config.js"
import { WebhooksConfig } from "./webhooks/Config.js"

/** The HTTP edge (platform/http/Edge.ts) over this platform's domains: login tokens, accounts, the storage route. */
const Edge = HttpLayerRouter.middleware(
  Effect.gen(function*() {
    const config = yield* AppConfig
    const tokens = yield* Tokens
    const apiKeys = yield* ApiKeys
    const oauth = yield* OAuth
    return makeEdge({
      config,
      idempotencyStore: yield* IdempotencyRepo,
      isLoggedIn: (token) => Effect.isSuccess(tokens.authenticate(token)),
      accountOf: (request) =>
        accountOf(request).pipe(
          Effect.provideService(Tokens, tokens),
          Effect.provideService(ApiKeys, apiKeys),
          Effect.provideService(OAuth, oauth),
          Effect.orDie
        ),
      isExempt: isStorageRoute,
      missingEndUser: (request) => missingEndUser(request) ? MISSING_END_USER : undefined,
      methodsServed: methodsServed(AtriumApi)
    })
  }),
  { global: true }
)

const ApiRoutes = HttpLayerRouter.addHttpApi(AtriumApi, { openapiPath: "/openapi.json" }).pipe(
  Layer.provide([HealthHttp, AuthHttp, AccountHttp, ModelsHttp.pipe(Layer.provide(AgentModelsLive)), BillingHttp, AgentsHttpLive, RunsHttpLive.pipe(Layer.provide(TurnCancelsLive.pipe(Layer.provide(Sessions.Default)))), ResponsesHttpLive, SessionsHttpLive, MarketHttpLive, NotificationsHttpLive, FilesHttpLive, KnowledgeHttpLive, EnvironmentsHttpLive, CredentialsHttpLive, MemoryHttpLive, EvolutionHttpLive, DistillationsHttpLive, WebhooksHttpLive, SchedulesHttpLive, TracesHttpLive, EvalsHttpLive]),
  Layer.provide([RunPayerLive, KnowledgeSearchLive, ExpertMemoryLive, TraceWriterLive]),
  Layer.provide(Wallets.Default)
)

/** The web app (web/dist): its pages, its assets and the login page. */
const WebAppRoutes = makeWebAppRoutes(fallbackLoginPage)

/** The API reference at /docs (platform/http/Reference.ts). */
const DocsRoute = makeReferenceRoute(AtriumApi)

export const Routes = Layer.mergeAll(ApiRoutes, DocsRoute, OAuthRoutes, WebAppRoutes, StorageRoute, McpRoute, Edge).pipe(
  Layer.provide([Tokens.Default, ApiKeys.Default, OAuth.Default, IdempotencyRepo.Default])
)

/** The entities this process runs, on one cluster runner over the database. */
const Entities = Layer.mergeAll(
  WalletLive,
  // Charges for several wallets of this runner from another, in one message (billing/WalletRelay.ts).
  WalletRelayLive,
  SessionLive.pipe(Layer.provide([RunPayerLive, KnowledgeSearchLive, ExpertMemoryLive, TraceWriterLive]), Layer.provide(Wallets.Default)),
  // Background runs (runs/Background.ts): the workflow registered on every runner, on the cluster's workflow engine;
  // a run's end goes out as its webhooks (the same `Webhooks` as the routes', so an emit wakes this process's worker).
  BackgroundRunLive.pipe(
    Layer.provide([RunPayerLive, KnowledgeSearchLive, ExpertMemoryLive, TraceWriterLive, RunEndWebhooksLive.pipe(Layer.provide(Webhooks.Default))]),
    Layer.provide(Wallets.Default)
  ),
  // Their sweep (runs/Background.ts): one in the cluster, a singleton, starting or resuming a background run whose
  // start or wake-up was lost on the way (a runner killed between writing the row and sending the start).
  BackgroundSweepLive,
  // Memory extraction (memory/Extraction.ts): a workflow registered on every runner, like background runs, so an
  // extraction a stopped runner had not run is executed by its shard's next owner.
  MemoryExtractionLive.pipe(Layer.provide(Wallets.Default)),
  // Schedules (schedules/Scheduler.ts): one scheduler in the cluster, a singleton, whose firings start background
  // runs or session turns.
  SchedulerLive.pipe(
    Layer.provide(ScheduleFirerLive),
    Layer.provide([Runs.Default, BackgroundRuns.Default, RunRecords.Default, Sessions.Default, Webhooks.Default, LedgerReads.Default]),
    Layer.provide([RunPayerLive, KnowledgeSearchLive, ExpertMemoryLive, TraceWriterLive]),
    Layer.provide(Wallets.Default)
  ),
  // Evaluations (evals/Driver.ts): one driver in the cluster, a singleton, whose passes start each eval run's rows
  // as background runs, grade them as they end, and complete the run.
  EvalDriverLive.pipe(
    Layer.provide([Runs.Default, BackgroundRuns.Default, RunRecords.Default]),
    Layer.provide([RunPayerLive, KnowledgeSearchLive, ExpertMemoryLive, TraceWriterLive]),
    Layer.provide(Wallets.Default)
  )
).pipe(
  Layer.provideMerge(ClusterWorkflowEngine.layer),
  Layer.provideMerge(ClusterLive)
)

/**
 * Every module's settings, read before the database opens: a bad setting (`PAYMENT_WEBHOOK_SECRET=`, an unfilled line
 * of an env file) stops the start at once, naming it, rather than after PGlite has opened and the cluster has come up
 * (seconds). The modules' own layers are these same values: a layer is built once per start.
 */
const Settings = Layer.mergeAll(
  AppConfig.Default,
  AgentsConfig.Default,
  BillingConfig.Default,
  ChallengeConfig.Default,
  CredentialsConfig.Default,
  DistillationConfig.Default,
  EvalsConfig.Default,
  FilesConfig.Default,
  KnowledgeConfig.Default,
  MarketConfig.Default,
  McpConfig.Default,
  MemoryConfig.Default,
  RunsConfig.Default,
  SchedulesConfig.Default,
  SessionsConfig.Default,
  ToolsConfig.Default,
  WebhooksConfig.Default
)

/**
 * Everything the routes stand on: configuration, the database with its migrations, the key-value store, and the
 * cluster with its entities.
 */
export const Infrastructure = TurnDrainLive.pipe(
  // Built after every entity, so a stop drains this runner's turns before any entity layer closes (and the cluster
  // with it): sessions/Activation.ts.
  Layer.provideMerge(Entities),
  Layer.provideMerge(Layer.mergeAll(AppConfig.Default, DatabaseLive, KeyValueLive, Stopping.Default, RunnerTurns.Default)),
  Layer.provide(Settings)
)

/**
 * Node's `server.close()` waits for every open connection, so one idle keep-alive socket or a stalled upload would
 * hold shutdown forever. This finalizer runs first (it is built last): it ends the held streams and the followers
 * (`Sse.endHeld`), closes idle connections at once and as each becomes idle (a run's stream that ends within the
 * grace leaves its keep-alive connection idle), and cuts the rest after `SHUTDOWN_GRACE`. The Node server's shutdown
 * interrupts no request fiber (each runs on its own until its connection closes): what is still answering at the
 * grace's end is cut with its connection.
 */
export const HttpServerLive = Layer.unwrapEffect(
  Effect.gen(function*() {
    const config = yield* AppConfig
    const stopping = yield* Stopping
    const server = createServer()
    // An idle keep-alive connection is closed by the client side first: a load balancer (60 s idle on common ones)
    // or an SDK's pool (a few seconds). With Node's 5 s the server could close a socket just as a client sent a
    // request on it, which the client sees as a reset connection (or the balancer as a 502), a charge among them.
    server.keepAliveTimeout = 65_000
    // Above the keep-alive timeout, as Node asks, so a reused connection's next request is not cut for its headers.
    server.headersTimeout = 66_000
    // The stop's one grace starts here (`stopping.begin`); the turn drain and the sessions' finalizers wait what is
    // left of it.
    const grace = Layer.scopedDiscard(Effect.addFinalizer(() =>
      Effect.zipRight(stopping.begin, Effect.sync(() => {
        // Nothing else ends them: the server's shutdown interrupts no request fiber, and a held stream has none.
        Sse.endHeld()
        server.closeIdleConnections()
        const idle = setInterval(() => server.closeIdleConnections(), 100).unref()
        server.once("close", () => clearInterval(idle))
        setTimeout(() => server.closeAllConnections(), Duration.toMillis(config.shutdownGrace)).unref()
      }))
    ))
    return grace.pipe(Layer.provideMerge(NodeHttpServer.layer(() => server, { port: config.port, host: config.host })))
  })
)

/**
 * The whole platform as one layer: serve `routes` on `HOST:PORT` until the scope closes. It also yields the
 * `HttpServer` (whose address tells a test which random port it got) and the infrastructure (a test's view of the
 * database). `ServerLive` serves the platform's own routes; a test may add routes of its own.
 */
export const makeServer = <E, R>(routes: Layer.Layer<never, E, R>) => Layer.unwrapEffect(
  Effect.gen(function*() {
    const router = yield* HttpLayerRouter.HttpRouter
    const config = yield* AppConfig
    const served = HttpServer.serve(router.asHttpEffect(), accessLog).pipe(
      // The body limit every request reads under, set once for the server (the edge checks it is there).
      Layer.provide(Layer.succeed(HttpIncomingMessage.MaxBodySize, Option.some(FileSystem.Size(config.maxBodyBytes))))
    )
    // With tracing off (main.ts: no OTLP endpoint) a span per request would be built only to be dropped: the
    // server makes none, and the access log gives the router a span that only remembers the route.
    return (yield* FiberRef.get(FiberRef.currentTracerEnabled))
      ? served
      : HttpMiddleware.withTracerDisabledWhen(served, () => true)
  })
).pipe(
  HttpServer.withLogAddress,
  // Order matters: every route is registered before the socket listens, so a request never reaches a server
  // that has no handler yet (Node would leave it hanging). `HttpLayerRouter.serve` builds them the other way round.
  Layer.provideMerge(HttpServerLive),
  Layer.provide(routes),
  Layer.provide([HttpLayerRouter.layer, NodeHttpServer.layerContext]),
  Layer.provideMerge(Infrastructure)
)

export const ServerLive = makeServer(Routes)
