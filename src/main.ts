import { NodeRuntime } from "@effect/platform-node"
import { Layer } from "effect"
import { ServerLive } from "./Server.js"

// The one entry point. runMain turns SIGINT/SIGTERM into interruption: the server stops accepting, open requests
// and streams are interrupted, and every layer (database, PGlite, Redis) is closed in reverse order.
Layer.launch(ServerLive).pipe(NodeRuntime.runMain)
