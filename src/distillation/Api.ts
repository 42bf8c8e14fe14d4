import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { IdentifierTaken } from "../agents/Domain.js"
import { PlatformAuthentication } from "../identity/Domain.js"
import { Forbidden, InvalidRequest, NotFound } from "../platform/Errors.js"
import { DistillationBusy, DistillationFailed, DistillationId, DistillationTimedOut } from "./Domain.js"
import { ListParams } from "../platform/http/Lists.js"
import { RunId } from "../runtime/Domain.js"

const Material = Schema.Struct({
  filename: Schema.String.annotations({ description: "Name of the source file, 1-200 characters" }),
  content: Schema.String.annotations({ description: "The file's text (not a path); at most 200 KB" })
})

const DraftView = Schema.Struct({
  name: Schema.String,
  description: Schema.String,
  category: Schema.String,
  instructions: Schema.String
})

const Summary = {
  sessionId: DistillationId,
  topic: Schema.String,
  draft: DraftView,
  agent: Schema.NullOr(Schema.Struct({ identifier: Schema.String, created: Schema.optional(Schema.Boolean) })),
  materials: Schema.Array(Schema.Struct({ filename: Schema.String, bytes: Schema.Int })),
  turns: Schema.Int,
  created_at: Schema.String,
  updated_at: Schema.String
}

const TurnView = Schema.Struct({
  ...Summary,
  answer: Schema.String,
  run: Schema.Struct({
    id: RunId,
    status: Schema.String,
    credits_charged: Schema.Number,
    usage: Schema.Struct({ input_tokens: Schema.Int, output_tokens: Schema.Int })
  })
})

const Transcript = Schema.Struct({
  ...Summary,
  messages: Schema.Array(Schema.Struct({
    role: Schema.Literal("user", "assistant"),
    content: Schema.String,
    at: Schema.String,
    run_id: Schema.optional(Schema.String)
  }))
})

// Unchecked: an id of another kind in the path is a distillation that is not there (404), as it was.
const Path = Schema.Struct({ id: DistillationId.unchecked })

/**
 * What starts a distillation and what continues one (HTTP and the MCP tools). The materials' limits are the
 * service's, so a breach gets a message that says what to fix.
 */
export const StartDistillation = Schema.Struct({
  topic: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(500)),
  materials: Schema.Array(Material)
})
export const DistillationMessage = Schema.Struct({ message: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(20_000)) })

/** Distillation (docs/distillation.md): the same conversations as the MCP tools, over HTTP. */
export class DistillationsApi extends HttpApiGroup.make("distillations")
  .add(
    HttpApiEndpoint.post("start", "/v1/distillations")
      .setPayload(StartDistillation)
      .addSuccess(TurnView, { status: 201 })
      .addError(DistillationFailed)
      .addError(DistillationTimedOut)
      .annotate(
        OpenApi.Description,
        "Start a distillation: the distiller reads the materials (at most 20 files, 200 KB each, 1 MB in all) and " +
          "drafts an agent. One run, billed to the caller."
      )
  )
  .add(
    HttpApiEndpoint.post("message", "/v1/distillations/:id/messages")
      .setPath(Path)
      .setPayload(DistillationMessage)
      .addSuccess(TurnView)
      .addError(NotFound)
      .addError(Forbidden)
      .addError(IdentifierTaken)
      .addError(DistillationBusy)
      .addError(DistillationFailed)
      .addError(DistillationTimedOut)
      .annotate(
        OpenApi.Description,
        "Continue a distillation: `name: ...`, `description: ...`, `category: ...`, free text for the instructions, " +
          "or `create` to create the agent draft."
      )
  )
  .add(HttpApiEndpoint.get("get", "/v1/distillations/:id").setPath(Path).addSuccess(Transcript).addError(NotFound))
  .add(
    HttpApiEndpoint.get("list", "/v1/distillations")
      .setUrlParams(ListParams)
      .addSuccess(Schema.Struct({ data: Schema.Array(Schema.Struct(Summary)), has_more: Schema.Boolean }))
      .addError(NotFound)
  )
  .middleware(PlatformAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Distillation")
  .annotate(OpenApi.Description, "Distil an expert's sessions into a smaller, cheaper expert.")
{}
