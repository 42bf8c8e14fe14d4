import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer } from "effect"
import { AtriumApi } from "../Api.js"
import { AuthenticationLive } from "../identity/Authentication.js"
import { Evals } from "./Evals.js"
import { FeedbackRows } from "./Feedback.js"
import { RunRows } from "./FromRun.js"
import { Caller } from "../identity/Domain.js"

export const EvalsHttp = HttpApiBuilder.group(AtriumApi, "evals", (handlers) =>
  Effect.gen(function*() {
    const evals = yield* Evals
    const feedback = yield* FeedbackRows
    const fromRun = yield* RunRows
    return handlers
      .handle("createDataset", ({ payload }) => Effect.flatMap(Caller, (caller) => evals.createDataset(caller, payload)))
      .handle("listDatasets", ({ urlParams }) => Effect.flatMap(Caller, (caller) => evals.listDatasets(caller, urlParams)))
      .handle("getDataset", ({ path }) => Effect.flatMap(Caller, (caller) => evals.getDataset(caller, path.id)))
      .handle("deleteDataset", ({ path }) => Effect.flatMap(Caller, (caller) => evals.deleteDataset(caller, path.id)))
      .handle("addRows", ({ path, payload }) => Effect.flatMap(Caller, (caller) => evals.addRows(caller, path.id, payload)))
      .handle("listRows", ({ path, urlParams }) => Effect.flatMap(Caller, (caller) => evals.listRows(caller, path.id, urlParams)))
      .handle("importRows", ({ path, payload }) => Effect.flatMap(Caller, (caller) => evals.importRows(caller, path.id, payload)))
      .handle("fromFeedback", ({ path, payload }) => Effect.flatMap(Caller, (caller) => feedback.add(caller, path.id, payload.limit ?? 100)))
      .handle("fromRun", ({ path, payload }) => Effect.flatMap(Caller, (caller) => fromRun.add(caller, path.id, payload)))
      .handle("createRun", ({ payload }) => Effect.flatMap(Caller, (caller) => evals.createRun(caller, payload)))
      .handle("listRuns", ({ urlParams }) => Effect.flatMap(Caller, (caller) => evals.listRuns(caller, urlParams)))
      .handle("getRun", ({ path }) => Effect.flatMap(Caller, (caller) => evals.getRun(caller, path.id)))
      .handle("cancelRun", ({ path }) => Effect.flatMap(Caller, (caller) => evals.cancelRun(caller, path.id)))
      .handle("runResults", ({ path, urlParams }) => Effect.flatMap(Caller, (caller) => evals.results(caller, path.id, urlParams)))
      .handle("compare", ({ urlParams }) => Effect.flatMap(Caller, (caller) => evals.compare(caller, urlParams.a, urlParams.b)))
  })).pipe(Layer.provide(AuthenticationLive))

export const EvalsHttpLive = EvalsHttp.pipe(Layer.provide([Evals.Default, FeedbackRows.Default, RunRows.Default]))
