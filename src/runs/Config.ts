import { Config, Duration, Effect } from "effect"
import { setting } from "../platform/Config.js"

export class RunsConfig extends Effect.Service<RunsConfig>()("atrium/runs/RunsConfig", {
  effect: Config.all({
    /**
     * How long a background run may take, from its creation: past it the run ends `incomplete` (reason
     * `max_duration`) wherever it is, so no run stays in progress for ever (docs/runs.md).
     */
    backgroundDeadline: setting("BACKGROUND_RUN_DEADLINE", Config.duration, Duration.hours(1)),
    /** How often a runner looks for cancels of the background runs it runs (written by any runner). */
    cancelPoll: setting("BACKGROUND_CANCEL_POLL", Config.duration, Duration.millis(250)),
    /**
     * How often the cluster's sweep (one, a singleton) makes sure of background runs whose start or wake-up may have
     * been lost, and how old such a run must be first (runs/Background.ts `BackgroundSweepLive`).
     */
    backgroundSweep: setting("BACKGROUND_SWEEP", Config.duration, Duration.seconds(15))
  })
}) {}
