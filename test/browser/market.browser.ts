import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { Page } from "playwright-core"
import { Browser } from "./Browser.js"
import {
  api,
  Atrium,
  assertAccessible,
  assertNoJargon,
  BUYER_CODE,
  BUYER_PHONE,
  checkPrerequisites,
  CREATOR_CODE,
  CREATOR_PHONE,
  internal,
  OPERATOR_CODE,
  OPERATOR_PHONE,
  person,
  Platform
} from "./support.js"

/**
 * The marketplace as a store (issue 48 item 4, docs/marketplace.md), as a buyer meets it in Chromium: the featured
 * row and a section per category with "See all", the sort select, icons (drawn and uploaded), a review written on the
 * expert page after using the expert, and the creator's page; axe on each new page.
 */

checkPrerequisites()

/** A 1x1 PNG: the studio's upload control sends it; the marketplace serves it back as image/png. */
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
  "base64"
)

const expert = async (base: string, token: string, name: string, price: number) => {
  const created = await api(base, token, "POST", "/v1/agents", { name, category: "design" })
  const id = created.identifier as string
  await api(base, token, "PATCH", `/v1/agents/${id}`, {
    description: `${name}, for the store test.`,
    billing: price === 0 ? { type: "FREE" } : { type: "UNLOCK", price, free_trial_per_user: 3, allow_trial: true }
  })
  const { submission } = await api(base, token, "POST", `/v1/agents/${id}/publish`)
  await internal(base, `/internal/reviews/${submission.id}/approve`)
  return id
}

describe("web app in Chromium: the marketplace store", () => {
  it.layer(Platform, { timeout: 240_000 })((it) => {
    it.effect("front page (featured, sections, see all), sort, icons, a review after use, the creator's page; axe on each", () =>
      Effect.gen(function*() {
        const { url: base } = yield* Atrium
        const browser = yield* Browser
        yield* Effect.promise(async () => {
          const creator = await person(browser, base, { phone: CREATOR_PHONE, code: CREATOR_CODE })
          await api(base, creator.token, "POST", "/api/creator/apply", {
            displayName: "Palette Studio",
            bio: "Experts for people who draw.",
            accountType: "individual",
            email: "palette@example.com"
          })
          await internal(base, `/internal/creators/${creator.userId}/approve`)
          const dear = await expert(base, creator.token, "Zebra Sketcher", 7)
          const cheap = await expert(base, creator.token, "Quill Colourist", 0)

          // The studio's icon control: upload a picture, see it, and the marketplace serves it.
          const studio = creator.page
          await studio.goto(`${base}/studio/${dear}`)
          const control = studio.getByTestId("studio-icon")
          await control.getByRole("img", { name: "The expert's icon" }).waitFor()
          await control.getByLabel(/Upload a picture/).setInputFiles({ name: "icon.png", mimeType: "image/png", buffer: PNG })
          await control.getByText("The new icon is saved.", { exact: false }).waitFor()
          await assertNoJargon(studio)

          const operator = await person(browser, base, { phone: OPERATOR_PHONE, code: OPERATOR_CODE })
          await api(base, operator.token, "POST", `/api/admin/agents/${dear}/feature`)

          const buyer = await person(browser, base, { phone: BUYER_PHONE, code: BUYER_CODE }, { credits: 50 })
          await api(base, buyer.token, "POST", "/v1/agents/run", { agent: cheap, message: "hello", stream: false })
          const page = buyer.page

          // The front page: Featured first, then Design with "See all".
          await page.goto(`${base}/marketplace`)
          const featured = page.getByTestId("featured")
          await featured.getByRole("link", { name: "Zebra Sketcher" }).waitFor()
          const icon = featured.getByTestId("expert-card").filter({ hasText: "Zebra Sketcher" }).locator("img")
          assert.match((await icon.getAttribute("src")) ?? "", /\/icon\?v=u/, "the uploaded icon")
          await until(page, "the icon loads", () => icon.evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth === 1))
          const design = page.getByTestId("section-design")
          const drawn = design.getByTestId("expert-card").filter({ hasText: "Quill Colourist" }).locator("img")
          assert.match((await drawn.getAttribute("src")) ?? "", /\/icon\?v=g/, "an icon drawn from the name")
          await assertAccessible(page, "/marketplace front page")

          // See all → the category, then sorted by price: the free one first.
          await design.getByRole("link", { name: /See all \d+ experts? in Design/ }).click()
          await page.waitForURL(/category=design/)
          await page.getByLabel("Sort by").selectOption({ label: "Lowest price" })
          await page.waitForURL(/sort=price/)
          const names = page.getByRole("list", { name: "Experts" }).getByRole("heading")
          await names.first().waitFor()
          const order = await names.allInnerTexts()
          assert.isBelow(order.indexOf("Quill Colourist"), order.indexOf("Zebra Sketcher"), order.join(", "))
          await assertAccessible(page, "/marketplace sorted list")

          // A review on the expert page, by someone who used the expert.
          await page.getByRole("link", { name: "Quill Colourist" }).click()
          await page.waitForURL(`${base}/marketplace/${cheap}`)
          await page.getByRole("heading", { level: 1, name: "Quill Colourist" }).waitFor()
          await page.getByTestId("rating").getByText("No reviews yet").waitFor()
          const form = page.getByRole("form", { name: "Your review" })
          await form.getByLabel("4 stars").check()
          await form.getByLabel("Your review (optional)").fill("Clear colour advice.")
          await form.getByRole("button", { name: "Publish review" }).click()
          await page.getByText("Thank you: your review is published.").waitFor()
          await page.getByTestId("rating").getByText("4 out of 5 from 1 review").waitFor()
          await page.getByRole("list", { name: "Reviews" }).getByText("Clear colour advice.").waitFor()
          await form.getByRole("button", { name: "Update review" }).waitFor()
          await assertNoJargon(page)
          await assertAccessible(page, "/marketplace/:identifier with a review")

          // Not used: the other expert's page says why there is no form.
          await page.goto(`${base}/marketplace/${dear}`)
          await page.getByRole("heading", { level: 1, name: "Zebra Sketcher" }).waitFor()
          await page.getByText("Use the expert at least once before you review it.").waitFor()

          // The creator's page, from the expert page's "by".
          await page.getByRole("link", { name: "Palette Studio" }).first().click()
          await page.waitForURL(`${base}/creators/${creator.userId}`)
          await page.getByRole("heading", { level: 1, name: "Palette Studio" }).waitFor()
          await page.getByText("Experts for people who draw.").waitFor()
          const theirs = page.getByRole("list", { name: "Experts by Palette Studio" })
          await theirs.getByRole("link", { name: "Zebra Sketcher" }).waitFor()
          await theirs.getByRole("link", { name: "Quill Colourist" }).waitFor()
          assert.notInclude(await page.locator("body").innerText(), "palette@example.com")
          await assertAccessible(page, "/creators/:id")

          for (const who of [creator, operator, buyer]) await who.context.close()
        })
      }))
  })
})

const until = async (page: Page, what: string, predicate: () => Promise<boolean>) => {
  for (let i = 0; i < 100; i++) {
    if (await predicate()) return
    await page.waitForTimeout(100)
  }
  throw new Error(`timed out waiting for ${what}`)
}
