import { chromium } from "playwright-core"
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true, args: ["--headless","--no-sandbox","--disable-gpu","--no-first-run","--disable-dev-shm-usage"] })
const page = await (await browser.newContext()).newPage()
page.on("pageerror", (e) => console.log("pageerror", String(e.stack ?? e).slice(0, 800)))
try {
  await page.goto("http://127.0.0.1:18090/marketplace", { waitUntil: "load" })
  await page.waitForTimeout(3000)
  console.log((await page.content()).slice(-300))
} catch (e) { console.log("ERR", String(e).slice(0, 300)) }
await browser.close()
