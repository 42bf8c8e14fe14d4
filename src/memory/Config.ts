import { Config, Duration, Effect } from "effect"
import { setting } from "../platform/Config.js"

export class MemoryConfig extends Effect.Service<MemoryConfig>()("atrium/memory/MemoryConfig", {
  effect: Config.all({
    /**
     * How long after a turn its extraction waits before it reads the turns of the same expert and end user that
     * came meanwhile (docs/memory.md "Extraction"): a busy session's turns share one model call.
     */
    extractionDebounce: setting("MEMORY_EXTRACTION_DEBOUNCE", Config.duration, Duration.seconds(1))
  })
}) {}
