import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { PlatformAuthentication } from "../identity/Domain.js"
import { InvalidRequest, NotFound } from "../platform/Errors.js"
import { RunId } from "../runtime/Domain.js"
import { TraceSearchParams, TraceSummary, TraceView } from "./Domain.js"

/** Traces (issue 46, docs/traces.md): a run's span tree, and a search over the traces the caller may read. */
export class TracesApi extends HttpApiGroup.make("traces")
  .add(
    HttpApiEndpoint.get("runTrace", "/v1/runs/:id/trace")
      // Unchecked: another kind of id is a run nobody has, 404 like an unknown one.
      .setPath(Schema.Struct({ id: RunId.unchecked.pipe(Schema.maxLength(100)) }))
      .addSuccess(TraceView)
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "The run's trace: its spans (OpenTelemetry GenAI names and attributes) with what each was charged. The run's " +
          "caller (the same account and `X-End-User-Id`) and the expert's creator may read it; anyone else gets 404, " +
          "as does a run whose trace is not written yet (within 2 s of its end)."
      )
  )
  .add(
    HttpApiEndpoint.get("searchTraces", "/v1/traces")
      .setUrlParams(TraceSearchParams)
      .addSuccess(Schema.Struct({ data: Schema.Array(TraceSummary), has_more: Schema.Boolean }))
      .annotate(
        OpenApi.Description,
        "The traces this caller may read, newest first: their own runs, and (acting as the account, without " +
          "`X-End-User-Id`) every run of their experts. Filters: `agent`, `version`, `end_user` (one of the " +
          "account's own end users), `session`, `tool`, `status` (`ok`/`error`), `min_credits`/`max_credits`, " +
          "`after`/`before` (ISO 8601 start times). Pages with `limit` (1-100, 20 by default) and `after` set to the " +
          "last `trace_id` of the previous page."
      )
  )
  .middleware(PlatformAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Traces")
  .annotate(OpenApi.Description, "Every run as a trace: model calls, tool calls and approval waits, with their credits.")
{}
