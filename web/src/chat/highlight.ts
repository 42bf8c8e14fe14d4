import hljs from "highlight.js/lib/core"
import bash from "highlight.js/lib/languages/bash"
import css from "highlight.js/lib/languages/css"
import diff from "highlight.js/lib/languages/diff"
import go from "highlight.js/lib/languages/go"
import java from "highlight.js/lib/languages/java"
import javascript from "highlight.js/lib/languages/javascript"
import json from "highlight.js/lib/languages/json"
import python from "highlight.js/lib/languages/python"
import rust from "highlight.js/lib/languages/rust"
import sql from "highlight.js/lib/languages/sql"
import typescript from "highlight.js/lib/languages/typescript"
import xml from "highlight.js/lib/languages/xml"
import yaml from "highlight.js/lib/languages/yaml"

/**
 * Syntax colouring of the chat's code blocks (issue 27): highlight.js's core with the languages experts write most,
 * loaded on demand (its own chunk, fetched the first time an answer has a fenced block with a language). The result
 * is escaped text in `<span class="hljs-…">`, and it goes through DOMPurify with the rest of the answer.
 */
for (const [name, language] of Object.entries({ bash, css, diff, go, java, javascript, json, python, rust, sql, typescript, xml, yaml })) {
  hljs.registerLanguage(name, language)
}
hljs.registerAliases(["sh", "shell", "zsh", "console"], { languageName: "bash" })
hljs.registerAliases(["html", "svg"], { languageName: "xml" })
hljs.registerAliases(["yml"], { languageName: "yaml" })

/** The highlighted HTML of `code`, or null for a language we do not colour (the block stays plain). */
export const highlight = (code: string, language: string): string | null => {
  if (!language || !hljs.getLanguage(language)) return null
  try {
    return hljs.highlight(code, { language, ignoreIllegals: true }).value
  } catch {
    return null
  }
}
