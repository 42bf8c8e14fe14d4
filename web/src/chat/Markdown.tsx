import DOMPurify from "dompurify"
import { Marked } from "marked"
import { type MouseEvent, useEffect, useMemo, useState } from "react"

/**
 * The expert's answers as Markdown (issue 27): paragraphs, lists, tables, links and fenced code with a copy
 * button. Nothing the model writes becomes markup of its own: raw HTML in the Markdown is shown as text, and the
 * rendered HTML goes through DOMPurify (no scripts, no event handlers, no `javascript:` links) before the page
 * sees it. Links open in a new tab without access to this one. Code blocks that name their language are coloured
 * by highlight.js, loaded on first use (`highlight.ts`, its own chunk): until it arrives the block is plain text.
 */
const escape = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")

type Highlight = (code: string, language: string) => string | null
let highlighter: Highlight | null = null
let loading: Promise<void> | null = null
const loadHighlighter = () => {
  loading ??= import("./highlight.js").then((m) => { highlighter = m.highlight }, () => { loading = null })
  return loading
}

const markdown = new Marked({ gfm: true, breaks: true, async: false })
markdown.use({
  renderer: {
    html: ({ text }) => escape(text),
    code: ({ text, lang }) => {
      const language = (lang ?? "").match(/^[\w+-]+/)?.[0] ?? ""
      const coloured = highlighter?.(text, language.toLowerCase()) ?? null
      const classes = [...(language ? [`language-${escape(language)}`] : []), ...(coloured === null ? [] : ["hljs"])].join(" ")
      return `<div class="code"><div class="code-head"><span>${escape(language || "code")}</span></div><pre tabindex="0"><code${classes ? ` class="${classes}"` : ""}>${coloured ?? escape(text)}</code></pre></div>`
    }
  }
})

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank")
    node.setAttribute("rel", "noopener noreferrer nofollow")
  }
})

const COPY = `<button type="button" class="copy secondary" data-copy="">Copy code</button>`

/** The sanitised HTML; our own copy buttons are added after sanitising (the model's buttons are not kept). */
export const renderMarkdown = (text: string): string =>
  DOMPurify.sanitize((markdown.parse(text) as string).trim(), { FORBID_TAGS: ["style", "form", "input", "button", "img"] })
    .replace(/<div class="code-head"><span>([^<]*)<\/span><\/div>/g, `<div class="code-head"><span>$1</span>${COPY}</div>`)

/** Whether the text has a fenced code block that names its language (worth loading the highlighter for). */
const namesLanguage = (text: string) => /^ {0,3}(`{3,}|~{3,}) *[\w+-]/m.test(text)

export const Markdown = ({ text, testId }: { text: string; testId?: string }) => {
  const [coloured, setColoured] = useState(highlighter !== null)
  const wanted = !coloured && namesLanguage(text)
  useEffect(() => {
    if (wanted) void loadHighlighter().then(() => setColoured(highlighter !== null))
  }, [wanted])
  // Which code block's Copy was used, and how it went: part of the rendered HTML, so a render that sets the HTML again
  // (the highlighter arriving, the conversation read again) keeps "Copied" instead of reverting to "Copy code".
  const [copied, setCopied] = useState<{ readonly block: number; readonly ok: boolean } | null>(null)
  const html = useMemo(() => {
    const rendered = renderMarkdown(text)
    if (copied === null) return rendered
    let block = -1
    return rendered.replaceAll(COPY, (button) => ++block === copied.block ? button.replace("Copy code", copied.ok ? "Copied" : "Copy failed") : button)
  }, [text, coloured, copied])
  const copy = (event: MouseEvent<HTMLDivElement>) => {
    const button = (event.target as HTMLElement).closest("button[data-copy]")
    if (!button) return
    const block = [...event.currentTarget.querySelectorAll("button[data-copy]")].indexOf(button)
    const code = button.closest(".code")?.querySelector("code")?.textContent ?? ""
    void navigator.clipboard?.writeText(code).then(() => setCopied({ block, ok: true }), () => setCopied({ block, ok: false }))
  }
  return <div className="answer md" data-testid={testId} onClick={copy} dangerouslySetInnerHTML={{ __html: html }} />
}
