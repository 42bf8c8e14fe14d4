import { Context, Effect, Layer } from "effect"
import { existsSync } from "node:fs"
import { chromium, type Browser as PlaywrightBrowser, type BrowserContext, type Page } from "playwright-core"

/** Debian's Chromium (`apt-get install chromium`); CHROMIUM_PATH overrides it. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium"

export const chromiumAvailable = existsSync(CHROMIUM)

/** One headless Chromium for the whole file, with a fresh profile, and nothing that calls home. */
export class Browser extends Context.Tag("test/Browser")<Browser, PlaywrightBrowser>() {
  static layer = Layer.scoped(
    Browser,
    Effect.acquireRelease(
      // Playwright gives every launch a fresh temporary profile (its own --user-data-dir) and removes it on close.
      Effect.promise(() =>
        chromium.launch({
          executablePath: CHROMIUM,
          headless: true,
          args: [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run"
          ]
        })
      ),
      (browser) => Effect.promise(() => browser.close())
    )
  )
}

export const DESKTOP = { width: 1280, height: 800 }
export const PHONE = { width: 390, height: 844 }

/** A fresh person: their own cookies and storage. */
export const newPerson = (browser: PlaywrightBrowser, viewport = DESKTOP, colorScheme: "light" | "dark" = "light") =>
  browser.newContext({ viewport, colorScheme })

/** Logs in through the login page, with the phone's fixed test code (`SMS_TEST_OTP`). */
export const logIn = async (page: Page, phone: string, code: string) => {
  await page.getByLabel("Phone number").fill(phone)
  await page.getByRole("button", { name: "Send code" }).click()
  await page.getByLabel("Code", { exact: true }).fill(code)
  await page.getByRole("button", { name: "Log in" }).click()
}

/** The login token the page holds (an HttpOnly cookie the page's script cannot read). */
export const tokenOf = async (context: BrowserContext) => {
  const cookie = (await context.cookies()).find((c) => c.name === "token")
  if (!cookie) throw new Error("no token cookie: not logged in")
  return cookie.value
}

export const userIdOfToken = (token: string): string =>
  JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString("utf8")).userId
