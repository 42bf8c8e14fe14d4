import { Either, FiberRef } from "effect"
import { checkSchema, validate } from "./JsonSchema.js"

/**
 * Structured output: the form a run's answer must take (`response_format` of Chat Completions, `text.format` of
 * Responses). `@effect/ai`'s `streamText` always asks its provider for text, so the format travels beside the call
 * as a fiber-local value, which every provider reads while it builds its request: the builtin model answers with an
 * instance of the schema, the Chat Completions provider sends `response_format`, the Responses provider `text.format`.
 */

export type OutputFormat =
  | { readonly type: "json_object" }
  | {
    readonly type: "json_schema"
    readonly name: string
    readonly description?: string | undefined
    readonly schema: Record<string, unknown>
    readonly strict: boolean
  }

/** The format of the model call running in this fiber; undefined: plain text. */
export const CurrentOutputFormat: FiberRef.FiberRef<OutputFormat | undefined> = FiberRef.unsafeMake<OutputFormat | undefined>(undefined)

/** A refused format: the parameter it names and why. */
export interface FormatProblem {
  readonly param: string
  readonly message: string
}

const NAME = /^[a-zA-Z0-9_-]{1,64}$/

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * A `json_schema` format's `{name, description, schema, strict}` checked as OpenAI does: the name is 1 to 64
 * letters, digits, `_` or `-`, the schema an object of the documented subset (strict rules when `strict: true`).
 */
const jsonSchemaFormat = (spec: Record<string, unknown>, param: string): Either.Either<OutputFormat, FormatProblem> => {
  if (typeof spec.name !== "string" || !NAME.test(spec.name)) {
    return Either.left({ param: `${param}.name`, message: "must be 1 to 64 letters, digits, '_' or '-'" })
  }
  const schema = spec.schema ?? { type: "object", properties: {}, additionalProperties: false, required: [] }
  const strict = spec.strict === true
  if (spec.strict != null && typeof spec.strict !== "boolean") return Either.left({ param: `${param}.strict`, message: "must be a boolean" })
  const problem = checkSchema(schema, strict)
  if (problem !== undefined) return Either.left({ param: `${param}.schema`, message: `Invalid schema for response_format '${spec.name}': ${problem}` })
  return Either.right({
    type: "json_schema",
    name: spec.name,
    description: typeof spec.description === "string" ? spec.description : undefined,
    schema: schema as Record<string, unknown>,
    strict
  })
}

const byType = (
  format: Record<string, unknown>,
  param: string,
  schemaSpec: () => Record<string, unknown> | undefined
): Either.Either<OutputFormat | undefined, FormatProblem> => {
  switch (format.type) {
    case "text":
      return Either.right(undefined)
    case "json_object":
      return Either.right({ type: "json_object" })
    case "json_schema": {
      const spec = schemaSpec()
      return spec === undefined
        ? Either.left({ param: `${param}.json_schema`, message: "is missing" })
        : jsonSchemaFormat(spec, param === "response_format" ? `${param}.json_schema` : param)
    }
    default:
      return Either.left({ param: `${param}.type`, message: `must be text, json_object or json_schema, not ${JSON.stringify(format.type)}` })
  }
}

/** Chat Completions' `response_format`: `{type: "json_schema", json_schema: {name, schema, strict}}` and the rest. */
export const fromResponseFormat = (format: unknown): Either.Either<OutputFormat | undefined, FormatProblem> =>
  format == null
    ? Either.right(undefined)
    : !isRecord(format)
    ? Either.left({ param: "response_format", message: "must be an object" })
    : byType(format, "response_format", () => isRecord(format.json_schema) ? format.json_schema : undefined)

/** Responses' `text.format`: `{type: "json_schema", name, schema, strict}` (the fields beside `type`). */
export const fromTextFormat = (format: unknown): Either.Either<OutputFormat | undefined, FormatProblem> =>
  format == null
    ? Either.right(undefined)
    : !isRecord(format)
    ? Either.left({ param: "text.format", message: "must be an object" })
    : byType(format, "text.format", () => format)

/** The format as Chat Completions' `response_format`, for an upstream. */
export const toResponseFormat = (format: OutputFormat) =>
  format.type === "json_object"
    ? { type: "json_object" as const }
    : {
      type: "json_schema" as const,
      json_schema: {
        name: format.name,
        ...(format.description === undefined ? {} : { description: format.description }),
        schema: format.schema,
        strict: format.strict
      }
    }

/** The format as Responses' `text.format`, for an upstream and for the response object. */
export const toTextFormat = (format: OutputFormat | undefined) =>
  format === undefined
    ? { type: "text" as const }
    : format.type === "json_object"
    ? { type: "json_object" as const }
    : {
      type: "json_schema" as const,
      name: format.name,
      ...(format.description === undefined ? {} : { description: format.description }),
      schema: format.schema,
      strict: format.strict
    }

/** Why a model's answer does not take the asked form (not JSON, not an object, not fitting the schema), if it doesn't. */
export const checkOutput = (format: OutputFormat, text: string): string | undefined => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return "the answer is not JSON"
  }
  if (format.type === "json_object") return isRecord(value) ? undefined : "the answer is not a JSON object"
  const problem = validate(format.schema, value)
  return problem === undefined ? undefined : `the answer does not fit the schema ${format.name}: ${problem}`
}
