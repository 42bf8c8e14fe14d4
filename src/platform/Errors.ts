import * as HttpApiError from "@effect/platform/HttpApiError"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { type Cause, Effect, FiberRef, ParseResult, Schema, type SchemaAST } from "effect"
import { globalValue } from "effect/GlobalValue"

/**
 * Errors that reach the wire (DESIGN.md §6). Each is a `Schema.TaggedError` whose schema *is* its HTTP encoding:
 * HttpApi writes it as the platform's one error body, `{"error":{"type","message"}}`, with the status it carries, and
 * documents that body; `atrium/client` and the web app decode it back into the same class. `type` is the snake_case
 * of the tag (`InvalidRequest` -> `invalid_request`).
 *
 * On the routes OpenAI's clients call, the body also carries OpenAI's fields, `code` (the `type` again) and `param`
 * (the request field at fault, or null): the server's edge marks those requests with `OpenAiFields`. A field the body
 * does not carry (`retry_after`) goes out as its header (`Retry-After`) through `ErrorHeaders`.
 *
 * The envelope drops what headers carry, so where an error must cross a process whole (an entity's RPC), its
 * lossless `{_tag, ...}` form is the class's `tagged` schema.
 */

/** `InvalidRequest` -> `invalid_request`. */
export const errorType = (tag: string): string =>
  tag.replace(/([a-z0-9])([A-Z])/g, "$1_$2").replace(/([A-Z])([A-Z][a-z])/g, "$1_$2").toLowerCase()

/** The one error body of the platform (DESIGN.md §6), for the answers outside the API (pages, file storage). */
export const errorBody = (type: string, message: string) => ({ error: { type, message } })

/** Whether the error bodies written now carry OpenAI's `code` and `param` (the OpenAI-compatible routes). */
export const OpenAiFields: FiberRef.FiberRef<boolean> = globalValue(
  Symbol.for("atrium/platform/Errors/OpenAiFields"),
  () => FiberRef.unsafeMake(false)
)

/** The headers the error bodies written so far have left out of the body (`Retry-After`); the edge sets them. */
export const ErrorHeaders: FiberRef.FiberRef<Readonly<Record<string, string>>> = globalValue(
  Symbol.for("atrium/platform/Errors/ErrorHeaders"),
  () => FiberRef.unsafeMake<Readonly<Record<string, string>>>({})
)

/** The envelope as the wire carries it. */
export interface Envelope {
  readonly error: {
    readonly type: string
    readonly message: string
    readonly code?: string | undefined
    readonly param?: string | null | undefined
    readonly details?: Record<string, unknown> | undefined
  }
}

/** The documented and decoded body of one error type. */
const envelopeOf = (identifier: string, type: string, description: string | undefined) =>
  Schema.Struct({
    error: Schema.Struct({
      type: Schema.Literal(type),
      message: Schema.String,
      code: Schema.optional(Schema.String).annotations({
        description: "On the OpenAI-compatible routes (/v1/chat/completions, /v1/responses, /v1/models, /v1/vector_stores): the type again, as OpenAI's clients read it."
      }),
      param: Schema.optional(Schema.NullOr(Schema.String)).annotations({
        description: "On the OpenAI-compatible routes: the request field at fault, or null."
      }),
      details: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })).annotations({
        description: "What a client needs to act on this error, where the error has more to say (eval_gate_failed: both pass rates)."
      })
    })
  }).annotations({ identifier, title: identifier, ...(description === undefined ? {} : { description }) })

/** What goes out as a header instead of in the body: `retry_after` (seconds) as `Retry-After`. */
const HEADER_FIELDS: ReadonlyArray<readonly [field: string, header: string]> = [["retry_after", "retry-after"]]

/** The body of `props` (the error's `{_tag, ...}` form), with OpenAI's fields when `openAi`. */
const bodyOf = (type: string, props: Record<string, unknown>, openAi: boolean): Envelope => {
  const message = typeof props["message"] === "string" ? props["message"] : "Request failed."
  const details = typeof props["details"] === "object" && props["details"] !== null ? { details: props["details"] as Record<string, unknown> } : {}
  if (!openAi) return { error: { type, message, ...details } }
  const param = typeof props["param"] === "string" ? props["param"] : null
  return { error: { type, message, code: type, param, ...details } }
}

/** Writes the envelope of an error: its body now, its header fields into `ErrorHeaders` for the edge. */
const encodeEnvelope = (type: string, props: Record<string, unknown>) =>
  Effect.gen(function*() {
    const headers: Record<string, string> = {}
    for (const [field, header] of HEADER_FIELDS) {
      if (typeof props[field] === "number") headers[header] = String(props[field])
    }
    // A failure no retry can fix says so to the clients that read it (the `openai` SDK's `x-should-retry`).
    if (props["final"] === true) headers["x-should-retry"] = "false"
    if (Object.keys(headers).length > 0) yield* FiberRef.update(ErrorHeaders, (before) => ({ ...before, ...headers }))
    return bodyOf(type, props, yield* FiberRef.get(OpenAiFields))
  })

/** A wire error class: the `Schema.TaggedError` it extends, whose encoded side is the envelope. */
export interface WireErrorClass<Self, Tag extends string, Fields extends Schema.Struct.Fields> extends
  Schema.Class<
    Self,
    { readonly _tag: Schema.tag<Tag> } & Fields,
    Envelope,
    Schema.Struct.Context<Fields>,
    Schema.Struct.Constructor<Fields>,
    {},
    Cause.YieldableError
  >
{
  readonly _tag: Tag
  /** The snake_case `type` of its envelope. */
  readonly type: string
  /** The HTTP status it answers. */
  readonly status: number
  /** Its lossless `{_tag, ...fields}` form, for what crosses a process whole (an entity's RPC). */
  readonly tagged: Schema.Schema<Self, Schema.Struct.Encoded<{ readonly _tag: Schema.tag<Tag> } & Fields>, Schema.Struct.Context<Fields>>
}

/**
 * `class NotFound extends WireError<NotFound>()("NotFound", { message: Schema.String }, { status: 404 }) {}`: a
 * `Schema.TaggedError` carrying its HTTP status, encoded on the wire as the envelope.
 */
export const WireError = <Self = never>() =>
<Tag extends string, Fields extends { readonly message: typeof Schema.String } & Schema.Struct.Fields>(
  tag: Tag,
  fields: Fields,
  options: { readonly status: number; readonly description?: string }
): WireErrorClass<Self, Tag, Fields> => {
  const Tagged: new(...args: Array<any>) => object = Schema.TaggedError<{}>()(
    tag,
    fields,
    HttpApiSchema.annotations({ status: options.status })
  )
  const type = errorType(tag)
  const envelope = envelopeOf(tag, type, options.description)
  /** The `TaggedError`'s own schema (`{_tag, ...}` <-> the class) for `self`, the class or a subclass. */
  const taggedAst = (self: object): SchemaAST.AST => Reflect.get(Tagged, "ast", self)
  const cache = new WeakMap<object, SchemaAST.AST>()
  class Wire extends Tagged {
    static readonly type = type
    static readonly status = options.status
  }
  Object.defineProperties(Wire, {
    tagged: {
      get(this: object) {
        return Schema.make(taggedAst(this))
      }
    },
    // The schema of the class: the envelope <-> the tagged form <-> the class.
    ast: {
      get(this: object): SchemaAST.AST {
        const cached = cache.get(this)
        if (cached !== undefined) return cached
        const ast = Schema.transformOrFail(envelope, Schema.make<any, any, never>(taggedAst(this)), {
          strict: false,
          decode: (body) =>
            ParseResult.succeed({
              _tag: tag,
              message: body.error.message,
              ...(typeof body.error.param === "string" ? { param: body.error.param } : {}),
              ...(body.error.details !== undefined ? { details: body.error.details } : {})
            }),
          encode: (props: Record<string, unknown>) => encodeEnvelope(type, props)
        }).annotations(HttpApiSchema.annotations({ status: options.status })).ast
        cache.set(this, ast)
        return ast
      }
    }
  })
  // The class's static `ast` was redefined above to the envelope's; its declared type is the tagged class's.
  return Wire as unknown as WireErrorClass<Self, Tag, Fields>
}

export class InvalidRequest extends WireError<InvalidRequest>()(
  "InvalidRequest",
  // `param`: the request field at fault, when one is (OpenAI's clients show it; their routes' envelope carries it).
  { message: Schema.String, param: Schema.optional(Schema.String) },
  { status: 400 }
) {}

export class Unauthorized extends WireError<Unauthorized>()("Unauthorized", { message: Schema.String }, { status: 401 }) {}

export class Forbidden extends WireError<Forbidden>()("Forbidden", { message: Schema.String }, { status: 403 }) {}

export class NotFound extends WireError<NotFound>()("NotFound", { message: Schema.String }, { status: 404 }) {}

/**
 * An `Idempotency-Key` sent with another request, or while its first request is still being answered; in the
 * ledger, a key already used for another user's entry (replaying it would show them someone else's balance).
 */
export class IdempotencyConflict extends WireError<IdempotencyConflict>()(
  "IdempotencyConflict",
  {
    message: Schema.String,
    /**
     * A conflict no retry can clear (the key was sent with another request): goes out as `x-should-retry: false`,
     * so the `openai` SDK, which retries every 409, sends it once. A key still being answered leaves it unset.
     */
    final: Schema.optional(Schema.Boolean)
  },
  { status: 409 }
) {}

/** A method the path does not serve; `allow` lists the ones it does (the `Allow` header). */
export class MethodNotAllowed extends WireError<MethodNotAllowed>()(
  "MethodNotAllowed",
  { message: Schema.String },
  { status: 405 }
) {}

/**
 * A request whose body had not all arrived by `REQUEST_BODY_TIMEOUT` (or stopped moving, on the storage route): its
 * connection is closed with the answer, so a client that never finishes its body holds no socket.
 */
export class RequestTimeout extends WireError<RequestTimeout>()("RequestTimeout", { message: Schema.String }, { status: 408 }) {}

export class PayloadTooLarge extends WireError<PayloadTooLarge>()("PayloadTooLarge", { message: Schema.String }, { status: 413 }) {}

export class UnsupportedMediaType extends WireError<UnsupportedMediaType>()(
  "UnsupportedMediaType",
  { message: Schema.String },
  { status: 415 }
) {}

/** `retry_after` (seconds) goes out as the `Retry-After` header (the body keeps `type` and `message`). */
export class RateLimited extends WireError<RateLimited>()(
  "RateLimited",
  { message: Schema.String, retry_after: Schema.optional(Schema.Int) },
  { status: 429 }
) {}

export class InternalError extends WireError<InternalError>()("InternalError", { message: Schema.String }, { status: 500 }) {}

/** An outage (issue 33): `retry_after` (seconds) goes out as `Retry-After`. */
export class ServiceUnavailable extends WireError<ServiceUnavailable>()(
  "ServiceUnavailable",
  { message: Schema.String, retry_after: Schema.optional(Schema.Int) },
  { status: 503 }
) {}

/** One issue of a failed decode: where, and what was wrong. */
type DecodeIssue = { readonly path: ReadonlyArray<PropertyKey>; readonly message: string }

/** Any wire error (an instance of a `WireError` class). */
export interface AnyWireError {
  readonly _tag: string
  readonly message: string
}

/** The class of a wire error: its schema (the envelope) and its status. */
export const wireClassOf = (error: AnyWireError): Schema.Schema<AnyWireError, Envelope> & { readonly status: number } =>
  // Every wire error's constructor is its `WireError` class (`makeWire`), whose schema is the envelope.
  error.constructor as unknown as Schema.Schema<AnyWireError, Envelope> & { readonly status: number }

/** "Invalid request: phone: is missing" — the field first, so a caller sees at once what to fix. */
export const describeDecodeIssues = (issues: ReadonlyArray<DecodeIssue>, fallback: string): string => {
  if (issues.length === 0) return `Invalid request: ${fallback.split("\n")[0] || "malformed input"}`
  // A value outside a union of literals is one issue per literal: told as one, listing every allowed value.
  const byPath = new Map<string, Array<string>>()
  for (const issue of issues) {
    const path = issue.path.length > 0 ? issue.path.join(".") : "body"
    byPath.set(path, [...(byPath.get(path) ?? []), issue.message || "invalid"])
  }
  const parts = [...byPath].slice(0, 3).map(([path, messages]) => {
    const expected = messages.map((message) => /^Expected (.+), actual (.+)$/s.exec(message))
    if (messages.length > 1 && expected.every((match) => match !== null)) {
      return `${path}: Expected one of ${expected.map((match) => match![1]).join(", ")}; actual ${expected[0]![2]}`
    }
    return `${path}: ${messages.join("; or ")}`
  })
  return `Invalid request: ${parts.join("; ")}`
}

/** The field of the first decode issue, as OpenAI's clients name it (`messages[0].role`). */
const paramOf = (issues: ReadonlyArray<DecodeIssue>): string | undefined => {
  const path = issues[0]?.path
  if (path === undefined || path.length === 0) return undefined
  return path.map((key, index) => typeof key === "number" ? `[${key}]` : index === 0 ? String(key) : `.${String(key)}`).join("")
}

/**
 * What HttpApi answers for a request it could not decode (`HttpApiDecodeError`): an `invalid_request` envelope that
 * names the field. Encode only: a client reads the same body as `InvalidRequest`.
 */
export const DecodeFailure: Schema.Schema<HttpApiError.HttpApiDecodeError, Envelope> = Schema.transformOrFail(
  envelopeOf("DecodeFailure", "invalid_request", "The request did not match the endpoint's schema: the message names the field first."),
  Schema.typeSchema(HttpApiError.HttpApiDecodeError),
  {
    strict: false,
    decode: (body, _, ast) => ParseResult.fail(new ParseResult.Forbidden(ast, body, "read as InvalidRequest")),
    encode: (error) => {
      const param = paramOf(error.issues)
      return encodeEnvelope("invalid_request", {
        message: describeDecodeIssues(error.issues, error.message),
        ...(param === undefined ? {} : { param })
      })
    }
  }
).annotations(HttpApiSchema.annotations({ status: 400 }))
