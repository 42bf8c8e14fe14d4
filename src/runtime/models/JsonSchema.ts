/**
 * The JSON Schema subset OpenAI documents for Structured Outputs, as three pure functions: `checkSchema` (is this a
 * schema we accept, and in `strict` mode does it follow OpenAI's strict rules), `validate` (does a value fit it) and
 * `instanceOf` (the builtin model's deterministic instance of it). docs/models.md "Structured output" states the
 * rules; the three must agree, so they live together.
 */

type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }
type Node = { readonly [key: string]: any }

const isRecord = (u: unknown): u is Node => typeof u === "object" && u !== null && !Array.isArray(u)

/** Keywords OpenAI's strict mode refuses (Structured Outputs, "Some type-specific keywords are not yet supported"). */
const STRICT_UNSUPPORTED = [
  "allOf",
  "not",
  "if",
  "then",
  "else",
  "dependentRequired",
  "dependentSchemas",
  "patternProperties",
  "unevaluatedProperties",
  "propertyNames",
  "minProperties",
  "maxProperties",
  "unevaluatedItems",
  "contains",
  "minContains",
  "maxContains",
  "uniqueItems"
]
const TYPES = new Set(["object", "array", "string", "number", "integer", "boolean", "null"])
/** OpenAI's strict limits: nesting depth and the number of object properties and enum values in one schema. */
const MAX_DEPTH = 10
const MAX_PROPERTIES = 5000
const MAX_ENUM_VALUES = 1000

/** Resolves a local `$ref` (`#`, `#/$defs/x`, `#/definitions/x`, any JSON pointer into the root). */
const resolve = (root: Node, ref: string): Node | undefined => {
  if (ref === "#") return root
  if (!ref.startsWith("#/")) return undefined
  let node: unknown = root
  for (const raw of ref.slice(2).split("/")) {
    const key = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~")
    if (!isRecord(node)) return undefined
    node = node[key]
  }
  return isRecord(node) ? node : undefined
}

const typesOf = (schema: Node): ReadonlyArray<string> | undefined =>
  typeof schema.type === "string" ? [schema.type] : Array.isArray(schema.type) ? schema.type : undefined

/**
 * Why a schema is refused (the path inside it and the reason), or undefined when it is accepted. Every schema must be
 * an object whose `type`s are JSON Schema's and whose `$ref`s resolve locally; `strict` adds OpenAI's rules: the root
 * is an object, every object lists all its properties in `required` and has `additionalProperties: false`, at most
 * 10 levels of nesting, 5000 properties and 1000 enum values, and none of the keywords above.
 */
export const checkSchema = (schema: unknown, strict: boolean): string | undefined => {
  if (!isRecord(schema)) return "must be a JSON Schema object"
  if (strict && (schema.type !== "object" || schema.anyOf !== undefined)) {
    return "the root of a strict schema must be an object (type: \"object\"), not anyOf"
  }
  let properties = 0
  let enums = 0
  const seen = new Set<Node>()
  const walk = (node: unknown, path: string, depth: number): string | undefined => {
    if (typeof node === "boolean" && !strict) return undefined
    if (!isRecord(node)) return `${path} must be a schema object`
    if (seen.has(node)) return undefined
    seen.add(node)
    if (depth > MAX_DEPTH && strict) return `${path} nests deeper than ${MAX_DEPTH} levels`
    if (typeof node.$ref === "string") {
      if (resolve(schema, node.$ref) === undefined) return `${path}.$ref ${node.$ref} does not resolve inside the schema`
    } else if (node.$ref !== undefined) return `${path}.$ref must be a string`
    const types = typesOf(node)
    if (node.type !== undefined && (types === undefined || types.some((t) => !TYPES.has(t)))) {
      return `${path}.type ${JSON.stringify(node.type)} is not a JSON Schema type`
    }
    if (node.enum !== undefined) {
      if (!Array.isArray(node.enum) || node.enum.length === 0) return `${path}.enum must be a non-empty array`
      enums += node.enum.length
    }
    if (node.pattern !== undefined) {
      try {
        new RegExp(node.pattern, "u")
      } catch {
        return `${path}.pattern is not a valid regular expression`
      }
    }
    if (strict) {
      const refused = STRICT_UNSUPPORTED.find((keyword) => node[keyword] !== undefined)
      if (refused !== undefined) return `${path}.${refused} is not supported in strict mode`
      if (types?.includes("object") === true || node.properties !== undefined) {
        const keys = Object.keys(isRecord(node.properties) ? node.properties : {})
        if (node.additionalProperties !== false) return `${path}.additionalProperties must be false in strict mode`
        const required = new Set(Array.isArray(node.required) ? node.required : [])
        const missing = keys.find((key) => !required.has(key))
        if (missing !== undefined) return `${path}.required must list every property in strict mode (${missing} is missing)`
      }
    }
    if (node.properties !== undefined) {
      if (!isRecord(node.properties)) return `${path}.properties must be an object`
      for (const [key, child] of Object.entries(node.properties)) {
        properties++
        const error = walk(child, `${path}.properties.${key}`, depth + 1)
        if (error !== undefined) return error
      }
    }
    if (node.required !== undefined && (!Array.isArray(node.required) || node.required.some((k: unknown) => typeof k !== "string"))) {
      return `${path}.required must be an array of property names`
    }
    if (isRecord(node.additionalProperties)) {
      const error = walk(node.additionalProperties, `${path}.additionalProperties`, depth + 1)
      if (error !== undefined) return error
    }
    if (node.items !== undefined) {
      const error = walk(node.items, `${path}.items`, depth + 1)
      if (error !== undefined) return error
    }
    for (const keyword of ["anyOf", "oneOf", "allOf", "prefixItems"]) {
      if (node[keyword] === undefined) continue
      if (!Array.isArray(node[keyword]) || node[keyword].length === 0) return `${path}.${keyword} must be a non-empty array`
      for (const [index, child] of (node[keyword] as Array<unknown>).entries()) {
        const error = walk(child, `${path}.${keyword}[${index}]`, depth + 1)
        if (error !== undefined) return error
      }
    }
    for (const keyword of ["$defs", "definitions"]) {
      if (node[keyword] === undefined) continue
      if (!isRecord(node[keyword])) return `${path}.${keyword} must be an object`
      for (const [key, child] of Object.entries(node[keyword])) {
        const error = walk(child, `${path}.${keyword}.${key}`, depth)
        if (error !== undefined) return error
      }
    }
    return undefined
  }
  const error = walk(schema, "schema", 1)
  if (error !== undefined) return error
  if (strict && properties > MAX_PROPERTIES) return `the schema has more than ${MAX_PROPERTIES} properties`
  if (strict && enums > MAX_ENUM_VALUES) return `the schema has more than ${MAX_ENUM_VALUES} enum values`
  return undefined
}

const jsonType = (value: unknown): string =>
  value === null ? "null" : Array.isArray(value) ? "array" : typeof value === "number" ? (Number.isInteger(value) ? "integer" : "number") : typeof value

const equal = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b)

const FORMATS: Record<string, RegExp> = {
  "date-time": /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/,
  date: /^\d{4}-\d{2}-\d{2}$/,
  time: /^\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})?$/,
  email: /^[^\s@]+@[^\s@]+$/,
  uuid: /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/,
  ipv4: /^(\d{1,3})(\.\d{1,3}){3}$/
}

/** Why `value` does not fit `schema` (the JSON path and the rule), or undefined when it fits. */
export const validate = (schema: unknown, value: unknown): string | undefined => {
  if (!isRecord(schema)) return undefined
  const root = schema
  const check = (node: unknown, value: unknown, path: string, depth: number): string | undefined => {
    if (node === false) return `${path} is not allowed`
    if (!isRecord(node)) return undefined
    if (depth > 64) return `${path} nests too deep`
    if (typeof node.$ref === "string") {
      const target = resolve(root, node.$ref)
      if (target === undefined) return `${path}: $ref ${node.$ref} does not resolve`
      const error = check(target, value, path, depth + 1)
      if (error !== undefined) return error
    }
    const types = typesOf(node)
    const actual = jsonType(value)
    if (types !== undefined && !types.some((t) => t === actual || (t === "number" && actual === "integer"))) {
      return `${path} must be ${types.join(" or ")}, not ${actual}`
    }
    if (node.const !== undefined && !equal(node.const, value)) return `${path} must be ${JSON.stringify(node.const)}`
    if (Array.isArray(node.enum) && !node.enum.some((option: unknown) => equal(option, value))) {
      return `${path} must be one of ${JSON.stringify(node.enum)}`
    }
    if (Array.isArray(node.anyOf) && !node.anyOf.some((branch: unknown) => check(branch, value, path, depth + 1) === undefined)) {
      return `${path} matches none of anyOf`
    }
    if (Array.isArray(node.oneOf) && node.oneOf.filter((branch: unknown) => check(branch, value, path, depth + 1) === undefined).length !== 1) {
      return `${path} must match exactly one of oneOf`
    }
    if (Array.isArray(node.allOf)) {
      for (const branch of node.allOf) {
        const error = check(branch, value, path, depth + 1)
        if (error !== undefined) return error
      }
    }
    if (typeof value === "string") {
      const length = [...value].length
      if (typeof node.minLength === "number" && length < node.minLength) return `${path} is shorter than ${node.minLength}`
      if (typeof node.maxLength === "number" && length > node.maxLength) return `${path} is longer than ${node.maxLength}`
      if (typeof node.pattern === "string" && !new RegExp(node.pattern, "u").test(value)) return `${path} does not match ${node.pattern}`
      const format = typeof node.format === "string" ? FORMATS[node.format] : undefined
      if (format !== undefined && !format.test(value)) return `${path} is not a ${node.format}`
    }
    if (typeof value === "number") {
      if (typeof node.minimum === "number" && value < node.minimum) return `${path} is below ${node.minimum}`
      if (typeof node.maximum === "number" && value > node.maximum) return `${path} is above ${node.maximum}`
      if (typeof node.exclusiveMinimum === "number" && value <= node.exclusiveMinimum) return `${path} must be above ${node.exclusiveMinimum}`
      if (typeof node.exclusiveMaximum === "number" && value >= node.exclusiveMaximum) return `${path} must be below ${node.exclusiveMaximum}`
      if (typeof node.multipleOf === "number" && node.multipleOf > 0 && Math.abs(value / node.multipleOf - Math.round(value / node.multipleOf)) > 1e-9) {
        return `${path} is not a multiple of ${node.multipleOf}`
      }
    }
    if (Array.isArray(value)) {
      if (typeof node.minItems === "number" && value.length < node.minItems) return `${path} has fewer than ${node.minItems} items`
      if (typeof node.maxItems === "number" && value.length > node.maxItems) return `${path} has more than ${node.maxItems} items`
      const prefix: Array<unknown> = Array.isArray(node.prefixItems) ? node.prefixItems : []
      for (const [index, item] of value.entries()) {
        const itemSchema = index < prefix.length ? prefix[index] : node.items
        const error = check(itemSchema, item, `${path}[${index}]`, depth + 1)
        if (error !== undefined) return error
      }
    }
    if (isRecord(value)) {
      const properties: Node = isRecord(node.properties) ? node.properties : {}
      for (const key of Array.isArray(node.required) ? node.required : []) {
        if (!(key in value)) return `${path}.${key} is required`
      }
      for (const [key, item] of Object.entries(value)) {
        const error = key in properties
          ? check(properties[key], item, `${path}.${key}`, depth + 1)
          : node.additionalProperties === false
          ? `${path}.${key} is not an allowed property`
          : check(node.additionalProperties, item, `${path}.${key}`, depth + 1)
        if (error !== undefined) return error
      }
    }
    return undefined
  }
  return check(schema, value, "$", 0)
}

const STRING_FORMATS: Record<string, string> = {
  "date-time": "2000-01-01T00:00:00Z",
  date: "2000-01-01",
  time: "00:00:00Z",
  duration: "P1D",
  email: "user@example.com",
  hostname: "example.com",
  ipv4: "192.0.2.1",
  ipv6: "2001:db8::1",
  uuid: "00000000-0000-4000-8000-000000000000",
  uri: "https://example.com/"
}

const numberIn = (node: Node, integer: boolean): number => {
  const step = integer ? 1 : 0.5
  let value = 0
  if (typeof node.minimum === "number" && node.minimum > value) value = node.minimum
  if (typeof node.exclusiveMinimum === "number" && node.exclusiveMinimum >= value) {
    value = integer ? Math.floor(node.exclusiveMinimum) + 1 : node.exclusiveMinimum + step
  }
  if (typeof node.maximum === "number" && node.maximum < value) value = node.maximum
  if (typeof node.exclusiveMaximum === "number" && node.exclusiveMaximum <= value) {
    value = integer ? Math.ceil(node.exclusiveMaximum) - 1 : node.exclusiveMaximum - step
  }
  if (typeof node.multipleOf === "number" && node.multipleOf > 0) value = Math.ceil(value / node.multipleOf) * node.multipleOf
  return integer ? Math.ceil(value) : value
}

/**
 * The builtin model's deterministic instance of a schema (docs/models.md): `const`, else the first `enum` value, else
 * the first `anyOf`/`oneOf` branch (past a depth of 6 the first branch that allows `null`), else by the first
 * non-null `type`: an object with every property in order; an array of `max(minItems, 1)` items (at most
 * `maxItems`); a string by its `format`, else its property's name (`"value"` where it has none) padded with `x` to
 * `minLength` and cut to `maxLength`; the number nearest 0 within the bounds, rounded up to `multipleOf`; `true`;
 * `null`. A `pattern` is not synthesised: an instance that does not match it fails validation like any model's.
 */
export const instanceOf = (schema: unknown): Json => {
  if (!isRecord(schema)) return null
  const root = schema
  const make = (node: unknown, name: string, depth: number): Json => {
    if (!isRecord(node)) return null
    if (typeof node.$ref === "string") {
      const target = resolve(root, node.$ref)
      return target === undefined || depth > 12 ? null : make({ ...target, ...withoutRef(node) }, name, depth + 1)
    }
    if (node.const !== undefined) return node.const
    if (Array.isArray(node.enum) && node.enum.length > 0) return node.enum[0]
    const branches = Array.isArray(node.anyOf) ? node.anyOf : Array.isArray(node.oneOf) ? node.oneOf : undefined
    if (branches !== undefined && branches.length > 0) {
      const nullable = depth > 6 ? branches.find((b: unknown) => isRecord(b) && typesOf(b)?.includes("null") === true) : undefined
      return make(nullable ?? branches[0], name, depth + 1)
    }
    if (Array.isArray(node.allOf) && node.allOf.length > 0) {
      return make(Object.assign({}, ...node.allOf.filter(isRecord), withoutKey(node, "allOf")), name, depth + 1)
    }
    const types = typesOf(node)
    const type = types === undefined
      ? node.properties !== undefined ? "object" : node.items !== undefined ? "array" : "null"
      : types.find((t) => t !== "null") ?? "null"
    switch (type) {
      case "object": {
        const out: Record<string, Json> = {}
        for (const [key, child] of Object.entries(isRecord(node.properties) ? node.properties : {})) {
          out[key] = make(child, key, depth + 1)
        }
        return out
      }
      case "array": {
        const min = typeof node.minItems === "number" ? node.minItems : 0
        const max = typeof node.maxItems === "number" ? node.maxItems : Infinity
        const count = Math.min(depth > 6 ? min : Math.max(min, 1), max)
        const prefix: Array<unknown> = Array.isArray(node.prefixItems) ? node.prefixItems : []
        return Array.from({ length: count }, (_, i) => make(i < prefix.length ? prefix[i] : node.items, name, depth + 1))
      }
      case "string": {
        const formatted = typeof node.format === "string" ? STRING_FORMATS[node.format] : undefined
        let text = formatted ?? name
        if (formatted === undefined) {
          if (typeof node.minLength === "number" && text.length < node.minLength) text = text.padEnd(node.minLength, "x")
          if (typeof node.maxLength === "number" && text.length > node.maxLength) text = text.slice(0, node.maxLength)
        }
        return text
      }
      case "integer":
        return numberIn(node, true)
      case "number":
        return numberIn(node, false)
      case "boolean":
        return true
      default:
        return null
    }
  }
  return make(schema, "value", 0)
}

const withoutKey = (node: Node, key: string): Node => {
  const { [key]: _, ...rest } = node
  return rest
}
const withoutRef = (node: Node): Node => withoutKey(node, "$ref")
