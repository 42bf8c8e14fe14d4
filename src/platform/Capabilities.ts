import { Effect } from "effect"

/**
 * What this process can offer beyond answering, as found at start (for example `run_code`, which needs its
 * containment): layers above report here, and `/api/health` and the start-up log say it. A capability that is
 * unavailable names why, so an operator can fix it without reading the code.
 */

import type { CapabilityStatus } from "./Api.js"

export class Capabilities extends Effect.Service<Capabilities>()("atrium/platform/Capabilities", {
  sync: () => {
    const statuses = new Map<string, CapabilityStatus>()
    return {
      report: (name: string, status: CapabilityStatus) => Effect.sync(() => void statuses.set(name, status)),
      all: Effect.sync(() => Object.fromEntries(statuses) as Record<string, CapabilityStatus>)
    } as const
  }
}) {}
