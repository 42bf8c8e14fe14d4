import type * as HttpApi from "@effect/platform/HttpApi"
import * as HttpLayerRouter from "@effect/platform/HttpLayerRouter"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as OpenApi from "@effect/platform/OpenApi"
import { Effect } from "effect"
import { pageHeaders } from "./Csp.js"

/**
 * The API reference at `/docs` (issue 48 item 1): one HTML page written from the platform's own OpenAPI document,
 * without JavaScript: every operation by group, with its parameters, body fields and answers. It replaced Scalar's
 * interactive explorer, 12 MB and failing axe (nine rules, three critical, in its own markup; docs/web.md): this page
 * is a few hundred KB, semantic HTML that a screen reader and a search box both read, and stays in step with the
 * contract because it is the contract's document. Requests are sent from any OpenAPI client given `/openapi.json`.
 */

type Json = Record<string, any>

const escape = (text: unknown) =>
  String(text ?? "").replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")

/** `code` spans of a description, the only Markdown the platform's descriptions use. */
const prose = (text: unknown) => escape(text).replace(/`([^`]+)`/g, "<code>$1</code>")

const refName = (ref: string) => ref.split("/").pop() ?? ref

/** A schema's type in a few words: `string`, `integer (1-100)`, `array of Session`, `"up" | "down"`. */
const typeOf = (schema: Json | undefined, depth = 0): string => {
  if (schema === undefined) return "any"
  if (typeof schema.$ref === "string") return refName(schema.$ref)
  if (Array.isArray(schema.enum)) return schema.enum.map((v: unknown) => JSON.stringify(v)).join(" | ")
  if (schema.const !== undefined) return JSON.stringify(schema.const)
  const variants = schema.anyOf ?? schema.oneOf
  if (Array.isArray(variants) && depth < 3) return variants.map((v: Json) => typeOf(v, depth + 1)).join(" or ")
  if (schema.type === "array") return `array of ${typeOf(schema.items, depth + 1)}`
  if (Array.isArray(schema.type)) return schema.type.join(" or ")
  const range = schema.minimum !== undefined || schema.maximum !== undefined
    ? ` (${schema.minimum ?? "…"}-${schema.maximum ?? "…"})`
    : schema.maxLength !== undefined ? ` (at most ${schema.maxLength} characters)` : ""
  return `${schema.type ?? "object"}${range}`
}

/** The schema a `$ref` names, followed once, for its fields. */
const resolve = (spec: Json, schema: Json | undefined): Json | undefined =>
  typeof schema?.$ref === "string" ? spec.components?.schemas?.[refName(schema.$ref)] : schema

// Tables scroll sideways on a phone: each is focusable (tabindex 0) so a keyboard can scroll it too (axe's
// scrollable-region-focusable).

/** A table of an object schema's fields, or a line naming its type when it has none. */
const fields = (spec: Json, schema: Json | undefined, caption: string) => {
  const object = resolve(spec, schema)
  const properties: Json = object?.properties ?? {}
  const names = Object.keys(properties)
  if (names.length === 0) return `<p>${escape(caption)}: <code>${escape(typeOf(schema))}</code></p>`
  const required = new Set<string>(object?.required ?? [])
  const rows = names.map((name) => {
    const field = properties[name] as Json
    // Schema's generated "a string matching the pattern …" says less than the pattern beside it: left out.
    const description = typeof field.description === "string" && !/^an? [a-z]+ (matching|between|with)/.test(field.description)
      ? field.description
      : ""
    return `<tr><th scope="row"><code>${escape(name)}</code></th><td>${escape(typeOf(field))}</td>` +
      `<td>${required.has(name) ? "yes" : "no"}</td><td>${prose(description)}</td></tr>`
  })
  return `<table tabindex="0"><caption>${escape(caption)}${typeof schema?.$ref === "string" ? ` (<code>${escape(refName(schema.$ref))}</code>)` : ""}</caption>` +
    `<thead><tr><th scope="col">Field</th><th scope="col">Type</th><th scope="col">Required</th><th scope="col">About</th></tr></thead>` +
    `<tbody>${rows.join("")}</tbody></table>`
}

const slug = (text: string) => text.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "")

const METHODS = ["get", "post", "put", "patch", "delete"] as const

const operationHtml = (spec: Json, path: string, method: string, operation: Json) => {
  const id = `op-${slug(operation.operationId ?? `${method}-${path}`)}`
  const parameters: Array<Json> = operation.parameters ?? []
  const body = operation.requestBody?.content
  const bodyType = body === undefined ? undefined : Object.keys(body)[0]
  const answers = Object.entries<Json>(operation.responses ?? {}).map(([status, answer]) => {
    const content = answer.content === undefined ? undefined : Object.entries<Json>(answer.content)[0]
    const shape = content === undefined ? "no body" : `<code>${escape(content[0])}</code>: <code>${escape(typeOf(content[1].schema))}</code>`
    return `<li><strong>${escape(status)}</strong> ${prose(answer.description)}: ${shape}</li>`
  })
  return `<article id="${id}" class="operation">` +
    `<h3><span class="method method-${method}">${method.toUpperCase()}</span> <code>${escape(path)}</code></h3>` +
    `<p>${prose(operation.description ?? operation.summary)}</p>` +
    (parameters.length === 0 ? "" :
      `<table tabindex="0"><caption>Parameters</caption><thead><tr><th scope="col">Name</th><th scope="col">In</th><th scope="col">Type</th>` +
      `<th scope="col">Required</th><th scope="col">About</th></tr></thead><tbody>` +
      parameters.map((p) =>
        `<tr><th scope="row"><code>${escape(p.name)}</code></th><td>${escape(p.in)}</td><td>${escape(typeOf(p.schema))}</td>` +
        `<td>${p.required ? "yes" : "no"}</td><td>${prose(p.description ?? "")}</td></tr>`
      ).join("") + "</tbody></table>") +
    (bodyType === undefined ? "" : `<p>Body: <code>${escape(bodyType)}</code></p>` + fields(spec, body[bodyType].schema, "Body fields")) +
    `<h4>Answers</h4><ul>${answers.join("")}</ul>` +
    `</article>`
}

/** The whole page: groups in the document's order, each with its operations. */
export const referencePage = (spec: Json) => {
  const groups = new Map<string, Array<string>>()
  for (const [path, item] of Object.entries<Json>(spec.paths ?? {})) {
    for (const method of METHODS) {
      const operation = item[method]
      if (operation === undefined) continue
      const tag: string = operation.tags?.[0] ?? "Other"
      groups.set(tag, [...(groups.get(tag) ?? []), operationHtml(spec, path, method, operation)])
    }
  }
  const tags = new Map<string, Json>((spec.tags ?? []).map((t: Json) => [t.name, t]))
  const names = [...groups.keys()]
  const title = `${escape(spec.info?.title ?? "API")} reference`
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">` +
    `<meta name="color-scheme" content="light dark"><title>${title}</title><style>${STYLE}</style></head><body>` +
    `<a class="skip" href="#main">Skip to the reference</a>` +
    `<header><h1>${title}</h1><p>${prose(spec.info?.description ?? "")}</p>` +
    `<p>The machine-readable document is <a href="/openapi.json">/openapi.json</a>: load it into any OpenAPI client ` +
    `to send requests.</p></header>` +
    `<nav aria-label="Groups"><h2>Groups</h2><ul>${names.map((n) => `<li><a href="#${slug(n)}">${escape(n)}</a></li>`).join("")}</ul></nav>` +
    `<main id="main">${names.map((n) =>
      `<section id="${slug(n)}" aria-labelledby="${slug(n)}-title"><h2 id="${slug(n)}-title">${escape(n)}</h2>` +
      `<p>${prose(tags.get(n)?.description ?? "")}</p>${groups.get(n)!.join("")}</section>`
    ).join("")}</main></body></html>`
}

const STYLE = [
  ":root{--bg:#fff;--fg:#1b1d22;--muted:#5b6170;--line:#d8dbe2;--accent:#3b4fd8;--code:#f3f4f7}",
  "@media (prefers-color-scheme: dark){:root{--bg:#111318;--fg:#e8eaf0;--muted:#a3a9b8;--line:#343947;--accent:#8c9bff;--code:#1b1e26}}",
  "body{margin:0 auto;max-width:70rem;padding:1rem;font:16px/1.5 system-ui,sans-serif;background:var(--bg);color:var(--fg)}",
  "a{color:var(--accent)}code{background:var(--code);padding:0 .2em;border-radius:3px;overflow-wrap:anywhere}",
  ".skip{position:absolute;left:-999px}.skip:focus{left:1rem;top:1rem;background:var(--bg);padding:.5rem}",
  "nav ul{display:flex;flex-wrap:wrap;gap:.3rem 1rem;padding:0;list-style:none}",
  ".operation{border-top:1px solid var(--line);padding:.5rem 0 1rem}",
  ".method{display:inline-block;min-width:4.2em;font-size:.85em;border:1px solid var(--line);border-radius:4px;text-align:center}",
  "table{border-collapse:collapse;width:100%;margin:.5rem 0;font-size:.95em;display:block;overflow-x:auto}",
  "caption{text-align:left;font-weight:600;padding:.2rem 0}",
  "th,td{border:1px solid var(--line);padding:.25rem .5rem;text-align:left;vertical-align:top}",
  "h4{margin:.5rem 0 .2rem}"
].join("")

/**
 * `GET /docs`: the page, written once on its first request. `/docs/explorer`, where Scalar's explorer was (linked
 * from this page until it was dropped), leads here: bookmarks of it keep working.
 */
export const makeReferenceRoute = (api: HttpApi.HttpApi.Any) => HttpLayerRouter.use(Effect.fnUntraced(function*(router) {
  const page = yield* Effect.cached(Effect.sync(() => referencePage(OpenApi.fromApi(api as never) as unknown as Json)))
  yield* router.add("GET", "/docs", Effect.map(page, (html) =>
    HttpServerResponse.text(html, {
      contentType: "text/html; charset=utf-8",
      headers: { ...pageHeaders(html), "cache-control": "no-cache" }
    })))
  yield* router.add("GET", "/docs/explorer", Effect.succeed(HttpServerResponse.redirect("/docs", { status: 301 })))
}))
