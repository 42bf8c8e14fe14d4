import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Layer } from "effect"
import { withWorkers } from "./platform/Workers.js"
import { withTelemetry } from "./platform/telemetry/Telemetry.js"
import { ServerLive } from "./Server.js"

// The one entry point. runMain turns SIGINT/SIGTERM into interruption: the server stops accepting, open requests
// and streams are interrupted, and every layer (database, PGlite, Redis) is closed in reverse order; the telemetry
// around it (log, metrics listener, span exporter, which flushes what it holds) closes last.
// The tracer is on only when OTEL_EXPORTER_OTLP_ENDPOINT gives spans somewhere to go (Telemetry.ts says why).
// runMain's pretty logger is off: Telemetry.ts picks JSON lines or pretty text itself.
// WORKERS=N: this process supervises N that serve (platform/Workers.ts).
withWorkers(Layer.launch(ServerLive)).pipe(withTelemetry, NodeRuntime.runMain({ disablePrettyLogger: true }))
