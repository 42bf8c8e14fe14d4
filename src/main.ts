import { NodeRuntime } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { ServerLive } from "./Server.js"

// The one entry point. runMain turns SIGINT/SIGTERM into interruption: the server stops accepting, open requests
// and streams are interrupted, and every layer (database, PGlite, Redis) is closed in reverse order.
// The tracer is off: no exporter is wired, so every span (one per request, one per Effect.fn) would be built and
// dropped. That is measurable on the cheapest route (GET /v1/meters: 0.39-0.46 ms of CPU per request without spans,
// 0.49-0.53 with them; BENCHMARKS.md), within the noise on a charge. Wiring an exporter means turning it back on.
Layer.launch(ServerLive).pipe(Effect.withTracerEnabled(false), NodeRuntime.runMain)
