/** The part of js-yaml 4 the promptfoo import uses (the package ships no types, and @types/js-yaml is not needed for one call). */
declare module "js-yaml" {
  export const JSON_SCHEMA: unknown
  export function load(text: string, options?: { readonly schema?: unknown }): unknown
  const yaml: { readonly load: typeof load; readonly JSON_SCHEMA: unknown }
  export default yaml
}
