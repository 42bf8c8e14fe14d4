import { Config, Effect } from "effect"
import { duration } from "../platform/Config.js"

/** Schedules' settings (docs/schedules.md, README settings), read once. */
export class SchedulesConfig extends Effect.Service<SchedulesConfig>()("atrium/schedules/SchedulesConfig", {
  effect: Config.all({
    /** How often the cluster's scheduler (one, on whichever runner holds its singleton) looks for due firings. */
    poll: duration("SCHEDULE_POLL", "1 second"),
    /**
     * A firing found later than this after its time was missed (the cluster was down, or the scheduler moving):
     * a schedule's `missed` policy then runs it once or skips it.
     */
    missedAfter: duration("SCHEDULE_MISSED_AFTER", "1 minute")
  })
}) {}
