import { NodeRuntime } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { ServerLive } from "./Server.js"

// The one entry point. runMain turns SIGINT/SIGTERM into interruption: the server stops accepting, open requests
// and streams are interrupted, and every layer (database, PGlite, Redis) is closed in reverse order.
// The tracer is off: no exporter is wired, so every span (one per request, one per Effect.fn) would be built and
// dropped, about a tenth of a charge's CPU under load (BENCHMARKS.md). Wiring an exporter means turning it back on.
Layer.launch(ServerLive).pipe(Effect.withTracerEnabled(false), NodeRuntime.runMain)
