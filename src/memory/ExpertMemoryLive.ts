import { Effect, Layer } from "effect"
import { ExpertMemory } from "../runtime/Ports.js"
import { Extraction } from "./Extraction.js"
import { Memory } from "./Memory.js"

/** The run engine's memory port (src/runtime/Ports.ts) on the memory service (a run's writes are the model's) and extraction. */
export const ExpertMemoryLive = Layer.effect(
  ExpertMemory,
  Effect.map(Effect.all([Memory, Extraction]), ([memory, extraction]) =>
    ExpertMemory.of({
      snapshot: memory.snapshot,
      read: memory.read,
      replace: (owner, label, old, next, call) => memory.replace(owner, label, old, next, "model", call),
      append: (owner, label, text, call) => memory.append(owner, label, text, "model", call),
      search: memory.search,
      addFact: (owner, text, call) => memory.addFact(owner, text, "model", call),
      supersede: (owner, id, text, call) => memory.supersede(owner, id, text, "model", call),
      afterTurn: extraction.afterTurn
    }))
).pipe(Layer.provide([Memory.Default, Extraction.Default]))
