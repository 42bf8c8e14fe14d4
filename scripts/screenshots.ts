/**
 * Screenshots of every page of the web app at desktop width (light) and phone width (dark), into
 * docs/screenshots/. Starts the platform (embedded, fresh data directory) and Debian's Chromium, fills the
 * platform with a few experts, a conversation, a sale, a run, an eval, a schedule, a webhook and an order, then visits
 * each page.
 *
 *   npm run build && npm run screenshots
 */
import { mkdirSync } from "node:fs"
import { join, resolve } from "node:path"
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core"
import { launchBenchPlatform } from "../bench/support.js"

const OUT = resolve(import.meta.dirname, "..", "docs", "screenshots")
const CREATOR = { phone: "+8613800000000", code: "123456" }
const BUYER = { phone: "+8613900000001", code: "654321" }
const INTERNAL_TOKEN = "screenshots-internal-token-0123456789abcdef"

const platform = await launchBenchPlatform({
  env: {
    SMS_TEST_OTP: `${CREATOR.phone}=${CREATOR.code},${BUYER.phone}=${BUYER.code}`,
    INTERNAL_TOKEN,
    // The checkout page is the test payment provider's (on by default outside production; said here to be sure).
    PAYMENTS_PROVIDER: "test",
    // The webhook the webhooks page lists points at this machine (nothing listens; no DNS lookup in a sandbox).
    TOOL_ALLOWED_HOSTS: "127.0.0.1",
    JWT_SECRET: "screenshots-secret-screenshots-secret-0123456789"
  }
})
const base = platform.base
const browser: Browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]
})

const api = async (token: string, method: string, path: string, body?: unknown) => {
  const response = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {})
  })
  const text = await response.text()
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`)
  return text ? JSON.parse(text) : undefined
}

const internal = (path: string, body?: unknown) => api(INTERNAL_TOKEN, "POST", path, body)

const logIn = async (context: BrowserContext, who: { phone: string; code: string }) => {
  const page = await context.newPage()
  await page.goto(`${base}/login`)
  await page.getByLabel("Phone number").fill(who.phone)
  await page.getByRole("button", { name: "Send code" }).click()
  await page.getByLabel("Code", { exact: true }).fill(who.code)
  await page.getByRole("button", { name: "Log in" }).click()
  await page.waitForURL(`${base}/`)
  const token = (await context.cookies()).find((c) => c.name === "token")!.value
  const userId = JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString()).userId as string
  await internal(`/internal/wallets/${userId}/grants`, { amount: 250, idempotency_key: crypto.randomUUID(), reason: "welcome credits" })
  await page.close()
  return token
}

try {
  mkdirSync(OUT, { recursive: true })
  const setup = await browser.newContext()
  const creatorToken = await logIn(setup, CREATOR)

  // An approved creator: the marketplace cards name them.
  await api(creatorToken, "POST", "/api/creator/apply", { displayName: "Lin Wei", bio: "Tax adviser.", accountType: "individual", email: "lin@example.com" })
  const creatorId = JSON.parse(Buffer.from(creatorToken.split(".")[1]!, "base64url").toString()).userId as string
  await internal(`/internal/creators/${creatorId}/approve`)

  const experts = [
    { name: "Tax Helper", category: "business", description: "Answers questions about personal taxes and does the arithmetic with a calculator.", price: "5" },
    { name: "Essay Coach", category: "writing", description: "Reads your draft and suggests a clearer structure, paragraph by paragraph.", price: "0" },
    { name: "SQL Tutor", category: "education", description: "Explains SQL queries step by step and helps you write your own.", price: "2.5" },
    { name: "Trip Planner", category: "lifestyle", description: "Plans a trip day by day within your budget.", price: "0" }
  ]
  const ids: Array<string> = []
  for (const expert of experts) {
    const created = await api(creatorToken, "POST", "/v1/agents", { name: expert.name, category: expert.category })
    const id = created.identifier as string
    ids.push(id)
    await api(creatorToken, "PATCH", `/v1/agents/${id}`, {
      description: expert.description,
      instructions: `You are ${expert.name}. Be precise and kind.`,
      opening_message: `Hello! I am ${expert.name}. What can I do for you?`,
      tools: [{ name: "calculator", permission: "ask" }, { name: "get_time", permission: "allow" }],
      case_demos: [{ title: "A first question", input: "Where do I start?", output: "Tell me what you have, and we go step by step." }],
      billing: expert.price === "0"
        ? { type: "FREE", price: "0" }
        : { type: "UNLOCK", price: expert.price, free_trial_per_user: 3, allow_trial: true }
    })
    const { submission } = await api(creatorToken, "POST", `/v1/agents/${id}/publish`)
    await internal(`/internal/reviews/${submission.id}/approve`)
  }
  // A new version of the first one waits for review beside the published one.
  await api(creatorToken, "PATCH", `/v1/agents/${ids[0]}`, { description: `${experts[0]!.description} Now with examples.` })
  await api(creatorToken, "POST", `/v1/agents/${ids[0]}/publish`)
  await api(creatorToken, "POST", "/api/user/apiKey/create", { name: "my laptop" })
  // The expert's own pages: a run (and its trace), a schedule, a webhook, an eval of the draft, and an order waiting on
  // the test provider's checkout.
  const run = await api(creatorToken, "POST", "/v1/agents/run", { agent: ids[0], message: "How much is 19% of 2,400?", background: true })
  await api(creatorToken, "POST", "/v1/schedules", { agent: ids[0], cron: "0 9 * * 1-5", timezone: "Europe/Paris", input: "Summarise this week's tax news.", description: "Weekday digest" })
  await api(creatorToken, "POST", "/v1/webhooks", { url: "http://127.0.0.1:9/atrium", events: ["run.failed"], description: "Alerts" })
  const dataset = await api(creatorToken, "POST", "/v1/evals/datasets", { agent: ids[0], name: "Tax basics" })
  await api(creatorToken, "POST", `/v1/evals/datasets/${dataset.id}/rows`, [
    { input: "hello", contains: "hello" },
    { input: "What is VAT?", contains: "value added tax" },
    { input: "thanks", contains: "thanks" }
  ])
  await api(creatorToken, "POST", "/v1/evals/runs", { dataset: dataset.id, agent: ids[0], graders: [{ type: "contains" }] })
  const order = await api(creatorToken, "POST", "/api/payment/orders", { amount: 100 })
  await setup.close()

  const buyerSetup = await browser.newContext()
  const buyerToken = await logIn(buyerSetup, BUYER)
  await api(buyerToken, "POST", "/api/purchases", { agent: ids[0] })
  await api(buyerToken, "POST", "/api/purchases", { agent: ids[2] })
  // A few conversations, so the cards count them.
  for (const agent of [ids[0], ids[0], ids[2], ids[1]]) await api(buyerToken, "POST", "/v1/sessions", { agent })
  await buyerSetup.close()

  const views = [
    { name: "desktop", viewport: { width: 1280, height: 860 }, colorScheme: "light" as const },
    { name: "phone", viewport: { width: 390, height: 844 }, colorScheme: "dark" as const }
  ]
  for (const view of views) {
    const guest = await browser.newContext({ viewport: view.viewport, colorScheme: view.colorScheme })
    const shot = async (page: Page, name: string) => {
      // A conversation keeps its event stream open, so "network idle" never comes: let the page settle instead.
      await page.waitForLoadState("load")
      await page.waitForTimeout(400)
      await page.screenshot({ path: join(OUT, `${name}-${view.name}.png`), fullPage: view.name === "desktop" && name !== "chat" })
    }
    const guestPage = await guest.newPage()
    await guestPage.goto(`${base}/login?next=%2Fstudio`)
    await guestPage.getByLabel("Phone number").fill(CREATOR.phone)
    await shot(guestPage, "login")
    await guest.close()

    const context = await browser.newContext({ viewport: view.viewport, colorScheme: view.colorScheme })
    await context.addCookies([{ name: "token", value: creatorToken, url: base }])
    const page = await context.newPage()
    await page.goto(`${base}/marketplace`)
    await page.getByRole("link", { name: "Tax Helper" }).waitFor()
    await shot(page, "marketplace")
    await page.goto(`${base}/marketplace/${ids[0]}`)
    await page.getByTestId("price").waitFor()
    await shot(page, "expert")
    await page.goto(`${base}/creators/${creatorId}`)
    await page.getByRole("heading", { level: 1, name: "Lin Wei" }).waitFor()
    await shot(page, "creator")

    await page.goto(`${base}/chat/${ids[0]}`)
    const box = page.getByRole("textbox", { name: "Message" })
    await box.fill("How much is 19% of 2,400?")
    await box.press("Enter")
    await page.getByTestId("answer").first().waitFor()
    await page.waitForFunction(() => !document.querySelector("[aria-busy=true]"))
    await box.fill(`/tool calculator {"expression":"2400*0.19"}`)
    await box.press("Enter")
    await page.getByRole("button", { name: "Approve" }).waitFor()
    await shot(page, "chat")
    await page.getByRole("button", { name: "Approve" }).click()
    await page.waitForFunction(() => !document.querySelector("[aria-busy=true]"))
    await page.goto(`${base}/chat`)
    await page.getByRole("link").filter({ hasText: "How much" }).first().waitFor()
    await shot(page, "chats")

    await page.goto(`${base}/studio`)
    await page.getByRole("link", { name: "Tax Helper" }).waitFor()
    await shot(page, "studio")
    await page.goto(`${base}/studio/${ids[0]}`)
    await page.getByTestId("submission").waitFor()
    await shot(page, "studio-edit")
    // The version history, version 1 compared with the draft.
    await page.getByRole("button", { name: "Compare version 1 with the draft" }).click()
    await page.getByTestId("version-diff").waitFor()
    await page.getByTestId("versions").scrollIntoViewIfNeeded()
    await shot(page, "studio-versions")
    await page.goto(`${base}/studio/${ids[0]}/runs?run=${run.id}`)
    await page.locator("main h1").waitFor()
    await page.waitForLoadState("networkidle")
    await shot(page, "studio-runs")
    await page.goto(`${base}/studio/${ids[0]}/traces?trace=${run.id}`)
    await page.getByTestId("trace").waitFor()
    await shot(page, "studio-traces")
    await page.goto(`${base}/studio/${ids[0]}/evals`)
    await page.getByRole("button", { name: "Open Tax basics" }).click()
    await page.waitForFunction(() => (document.querySelector("[data-testid=eval-runs] tbody tr")?.textContent ?? "").includes("Finished"))
    await page.getByTestId("eval-runs").locator("tbody tr th button").first().click()
    await page.getByTestId("eval-results").waitFor()
    await shot(page, "studio-evals")
    await page.goto(`${base}/studio/${ids[0]}/schedules`)
    await page.locator("main h1").waitFor()
    await page.waitForLoadState("networkidle")
    await shot(page, "studio-schedules")
    await page.goto(`${base}/studio/${ids[0]}/webhooks`)
    await page.locator("main h1").waitFor()
    await page.waitForLoadState("networkidle")
    await shot(page, "studio-webhooks")
    await page.goto(`${base}/earnings`)
    await page.locator("main h1").waitFor()
    await page.waitForLoadState("networkidle")
    await shot(page, "earnings")
    await page.goto(`${base}/wallet`)
    await page.getByRole("table").waitFor()
    await shot(page, "wallet")
    await page.goto(`${base}/checkout?order=${order.id}`)
    await page.getByTestId("checkout-amount").waitFor()
    await shot(page, "checkout")
    await page.goto(`${base}/knowledge`)
    await page.locator("main h1").waitFor()
    await page.waitForLoadState("networkidle")
    await shot(page, "knowledge")
    await page.goto(`${base}/keys`)
    await page.getByRole("table").waitFor()
    await shot(page, "keys")
    await context.close()
  }
  console.log(`screenshots in ${OUT}`)
} finally {
  await browser.close()
  await platform.stop()
}
