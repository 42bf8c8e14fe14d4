import { assert, describe, it } from "@effect/vitest"
import { checkSchema, instanceOf, validate } from "../../../src/runtime/models/JsonSchema.js"

/** The JSON Schema subset of structured output (docs/models.md): the check, the validation and the builtin instance. */
describe("JsonSchema", () => {
  it("instanceOf follows the documented rule, and its instance validates", () => {
    const schema = {
      type: "object",
      properties: {
        name: { type: "string", minLength: 6 },
        code: { type: "string", maxLength: 2 },
        when: { type: "string", format: "date-time" },
        count: { type: "integer", exclusiveMinimum: 3, multipleOf: 5 },
        ratio: { type: "number", maximum: -1 },
        kind: { enum: ["a", "b"] },
        fixed: { const: 42 },
        maybe: { anyOf: [{ type: "string" }, { type: "null" }] },
        nullable: { type: ["null", "boolean"] },
        list: { type: "array", items: { $ref: "#/$defs/item" }, minItems: 2 },
        none: { type: "array", items: { type: "string" }, maxItems: 0 }
      },
      required: ["name"],
      additionalProperties: false,
      $defs: { item: { type: "object", properties: { id: { type: "integer" } }, required: ["id"], additionalProperties: false } }
    }
    const value = instanceOf(schema)
    assert.deepStrictEqual(value, {
      name: "namexx",
      code: "co",
      when: "2000-01-01T00:00:00Z",
      count: 5,
      ratio: -1,
      kind: "a",
      fixed: 42,
      maybe: "maybe",
      nullable: true,
      list: [{ id: 0 }, { id: 0 }],
      none: []
    })
    assert.isUndefined(validate(schema, value))
    assert.strictEqual(validate(schema, { ...(value as object), extra: 1 }), "$.extra is not an allowed property")
    assert.strictEqual(validate(schema, { ...(value as object), count: 4 }), "$.count is not a multiple of 5")
    assert.strictEqual(validate(schema, {}), "$.name is required")
  })

  it("checkSchema: OpenAI's strict rules only when strict", () => {
    const loose = { type: "object", properties: { a: { type: "string" } } }
    assert.isUndefined(checkSchema(loose, false))
    assert.include(checkSchema(loose, true)!, "additionalProperties must be false")
    assert.include(checkSchema({ ...loose, additionalProperties: false }, true)!, "required must list every property")
    assert.include(checkSchema({ anyOf: [{ type: "object" }] }, true)!, "root of a strict schema")
    assert.include(checkSchema({ type: "object", properties: {}, required: [], additionalProperties: false, allOf: [{}] }, true)!, "allOf")
    assert.include(checkSchema({ type: "integerish" }, false)!, "not a JSON Schema type")
    assert.include(checkSchema({ type: "object", properties: { a: { $ref: "#/$defs/nope" } } }, false)!, "does not resolve")
  })
})
