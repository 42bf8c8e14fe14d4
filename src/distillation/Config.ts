import { Config, Effect } from "effect"
import { duration, setting } from "../platform/Config.js"
import { BUILTIN_MODEL_ID } from "../runtime/models/Builtin.js"

export class DistillationConfig extends Effect.Service<DistillationConfig>()("atrium/distillation/DistillationConfig", {
  effect: Config.all({
    /** How long one distillation may run. */
    timeout: duration("DISTILLATION_TIMEOUT", "2 minutes"),
    /** The model the distiller runs on; the builtin one only echoes, so the platform words the draft itself then. */
    model: setting("DISTILLATION_MODEL", Config.string, BUILTIN_MODEL_ID)
  })
}) {}
