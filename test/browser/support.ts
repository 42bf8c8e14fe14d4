import { assert } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { existsSync, readFileSync } from "node:fs"
import { createRequire } from "node:module"
import type { BrowserContext, Page } from "playwright-core"
import { launchPlatform, type PlatformProcess } from "../support/Process.js"
import { makeMigratedStorage } from "../support/Templates.js"
import { Browser, CHROMIUM, chromiumAvailable, logIn, newPerson, tokenOf, userIdOfToken } from "./Browser.js"

/**
 * What the browser suite's files share: one platform and one Chromium per file, the people who use it, and the
 * few things a test does from outside the browser (the review desk's grants).
 */

/**
 * The page's `document`, as far as the predicates of `until` use it: they run in the browser (`waitForFunction`),
 * while these files are typechecked for Node, without the DOM library.
 */
export interface PageNode {
  readonly textContent: string | null
  /** A form field's value (`input`, `textarea`, `select`). */
  readonly value?: string
  getBoundingClientRect(): { top: number; bottom: number }
  getAttribute(name: string): string | null
}
declare global {
  // eslint-disable-next-line no-var
  var document: {
    querySelector(selector: string): PageNode | null
    querySelectorAll(selector: string): ArrayLike<PageNode> & Iterable<PageNode>
  }
}

export const INTERNAL_TOKEN = "test-internal-token-0123456789abcdef"
export const PAYMENT_SECRET = "test-payment-secret-0123456789"
export const BUYER_PHONE = "+8613900000001"
export const BUYER_CODE = "654321"
export const OPERATOR_PHONE = "+8613700000009"
export const OPERATOR_CODE = "111222"
export const CREATOR_PHONE = "+8613800000000"
export const CREATOR_CODE = "123456"

/**
 * The platform under test: `dist/main.js` as its own process, what `npm start` runs (DESIGN.md §7), on storage of its
 * own that starts as a copy of the run's migrated template (`makeMigratedStorage`: a data directory, as CI runs it,
 * or with DATABASE_URL a PostgreSQL database); gone, with its data, when the file ends.
 */
export class Atrium extends Context.Tag("test/browser/Atrium")<Atrium, PlatformProcess>() {
  static layer = (env: Record<string, string> = {}) =>
    Layer.scoped(
      Atrium,
      Effect.gen(function*() {
        const storage = yield* makeMigratedStorage
        const platform = yield* launchPlatform({
          ...storage.env,
          // Past SMS_CHALLENGE_AFTER logins from 127.0.0.1 the login page solves a proof of work: a small one here.
          SMS_CHALLENGE_MAX_NUMBER: "1000",
          ...env
        })
        // Gone, and waited for, before its storage is removed (finalizers run last added, first run).
        yield* Effect.addFinalizer(() => Effect.promise(platform.kill))
        return platform
      })
    )
}

/** The platform and Chromium of a file, with settings of its own on top of the suite's (`env`). */
export const platformWith = (env: Record<string, string> = {}) =>
  Layer.merge(
    Atrium.layer({
      INTERNAL_TOKEN,
      PAYMENT_WEBHOOK_SECRET: PAYMENT_SECRET,
      ADMIN_PHONES: OPERATOR_PHONE,
      SMS_TEST_OTP: `${CREATOR_PHONE}=${CREATOR_CODE},${BUYER_PHONE}=${BUYER_CODE},${OPERATOR_PHONE}=${OPERATOR_CODE}`,
      // Another build of the web app (say, main's, to see a test fail before its fix): WEB_DIST=/path/to/web/dist.
      ...(process.env.WEB_DIST ? { WEB_DIST: process.env.WEB_DIST } : {}),
      ...env
    }),
    Browser.layer
  )

export const Platform = platformWith()

export const checkPrerequisites = () => {
  if (!existsSync("web/dist/index.html")) {
    throw new Error("The web app is not built: run `npm run build:web` (npm ci does it) before `npm run test:browser`.")
  }
  if (!chromiumAvailable) throw new Error(`No Chromium at ${CHROMIUM}: apt-get install chromium (or set CHROMIUM_PATH).`)
}

/** Waits until the page satisfies `predicate` (run in the page); the failure names what was awaited. */
export const until = async (page: Page, what: string, predicate: () => boolean) => {
  try {
    await page.waitForFunction(predicate, undefined, { timeout: 30_000 })
  } catch (error) {
    throw new Error(`waited in vain for: ${what}\n${String(error)}`)
  }
}

/** 100 credits from the review desk's side of the platform (an internal route: the private network and its token). */
export const grant = async (base: string, userId: string, amount = 100) => {
  const reply = await fetch(`${base}/internal/wallets/${userId}/grants`, {
    method: "POST",
    headers: { authorization: `Bearer ${INTERNAL_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ amount, idempotency_key: crypto.randomUUID(), reason: "browser test" })
  })
  assert.strictEqual(reply.status, 200, await reply.text())
}

/** Calls the API as the person whose login token this is. */
export const api = async (base: string, token: string, method: string, path: string, body?: unknown) => {
  const reply = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await reply.text()
  if (!reply.ok) throw new Error(`${method} ${path}: ${reply.status} ${text}`)
  return text ? JSON.parse(text) : undefined
}

export const internal = async (base: string, path: string, body?: unknown) => {
  const reply = await fetch(base + path, {
    method: "POST",
    headers: { authorization: `Bearer ${INTERNAL_TOKEN}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await reply.text()
  assert.strictEqual(reply.status, 200, text)
  return JSON.parse(text)
}

export interface Person {
  readonly context: BrowserContext
  readonly page: Page
  readonly token: string
  readonly userId: string
}

/** A person in their own browser context, logged in through the login page, with `credits` granted. */
/** Login tokens by phone: a second login of the same phone within a minute would wait for the SMS cooldown. */
const tokens = new Map<string, string>()

export const person = async (
  browser: Parameters<typeof newPerson>[0],
  base: string,
  who: { phone: string; code: string },
  options: { credits?: number; viewport?: { width: number; height: number }; colorScheme?: "light" | "dark" } = {}
): Promise<Person> => {
  const context = await newPerson(browser, options.viewport, options.colorScheme)
  const page = await context.newPage()
  page.setDefaultTimeout(20_000)
  page.on("pageerror", (error) => console.error("page error:", error))
  const known = tokens.get(`${base} ${who.phone}`)
  if (known) {
    await context.addCookies([{ name: "token", value: known, url: base, httpOnly: true }])
    await page.goto(`${base}/`)
  } else {
    await page.goto(`${base}/login`)
    await logIn(page, who.phone, who.code)
    await page.waitForURL(`${base}/`)
  }
  const token = await tokenOf(context)
  tokens.set(`${base} ${who.phone}`, token)
  const userId = userIdOfToken(token)
  if (options.credits) await grant(base, userId, options.credits)
  return { context, page, token, userId }
}

/** A published expert, made through the API and approved by the review desk: what a buyer finds. */
export const publishedExpert = async (
  base: string,
  creatorToken: string,
  fields: { name: string; billing?: unknown; tools?: unknown; opening_message?: string }
) => {
  const created = await api(base, creatorToken, "POST", "/v1/agents", { name: fields.name, category: "business" })
  const id = created.identifier as string
  await api(base, creatorToken, "PATCH", `/v1/agents/${id}`, {
    description: `${fields.name}, for the browser suite.`,
    ...(fields.billing === undefined ? {} : { billing: fields.billing }),
    ...(fields.tools === undefined ? {} : { tools: fields.tools }),
    ...(fields.opening_message === undefined ? {} : { opening_message: fields.opening_message })
  })
  const { submission } = await api(base, creatorToken, "POST", `/v1/agents/${id}/publish`)
  await internal(base, `/internal/reviews/${submission.id}/approve`)
  return id
}

/** Words of Schema's parse errors, which no page may show (issue 27 item 5). */
export const JARGON = /Schema|declaration|Expected|└─/

export const assertNoJargon = async (page: Page) => {
  const text = await page.locator("body").innerText()
  assert.notMatch(text, JARGON, `the page shows schema text:\n${text}`)
}

const AXE = createRequire(import.meta.url).resolve("axe-core/axe.min.js")

/** axe-core on the page as it is now: the serious and critical violations, said by rule and element. */
export const axeViolations = async (page: Page): Promise<Array<string>> => {
  // Evaluated, not added as a script tag: the page's Content-Security-Policy refuses inline scripts.
  await page.evaluate(readFileSync(AXE, "utf8"))
  const found = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run: (context: unknown, options: unknown) => Promise<{ violations: Array<{ id: string; impact: string; nodes: Array<{ target: Array<string> }> }> }> } }).axe
    const result = await axe.run((globalThis as unknown as { document: unknown }).document, { resultTypes: ["violations"] })
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, targets: v.nodes.map((n) => n.target.join(" ")).slice(0, 3) }))
  })
  return found.filter((v) => v.impact === "serious" || v.impact === "critical").map((v) => `${v.impact} ${v.id}: ${v.targets.join(", ")}`)
}

/**
 * The page is no wider than its window: nothing to scroll sideways (a 390 px phone showed the Evals page 528 px wide,
 * its cards cut off). The failure names the elements that reach past the right edge.
 */
export const assertNoHorizontalOverflow = async (page: Page, state: string) => {
  const found = await page.evaluate(() => {
    const doc = (globalThis as unknown as { document: { documentElement: { scrollWidth: number; clientWidth: number }; querySelectorAll(s: string): Iterable<{ tagName: string; className: unknown; getBoundingClientRect(): { right: number }; closest(s: string): unknown }> } }).document
    const width = doc.documentElement.clientWidth
    const past = [...doc.querySelectorAll("body *")]
      .filter((el) => el.getBoundingClientRect().right > width + 0.5 && !el.closest(".visually-hidden, thead"))
      .slice(0, 8)
      .map((el) => `${el.tagName.toLowerCase()}${typeof el.className === "string" && el.className ? "." + el.className.trim().replace(/\s+/g, ".") : ""} (right edge ${Math.round(el.getBoundingClientRect().right)})`)
    return { scrollWidth: doc.documentElement.scrollWidth, clientWidth: width, past }
  })
  assert.isAtMost(found.scrollWidth, found.clientWidth, `${state} is ${found.scrollWidth} px wide in a ${found.clientWidth} px window: ${found.past.join(", ")}`)
}

export const assertAccessible = async (page: Page, state: string) => {
  const violations = await axeViolations(page)
  assert.deepStrictEqual(violations, [], `axe on ${state}`)
}
