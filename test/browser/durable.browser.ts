import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { createServer, type IncomingHttpHeaders } from "node:http"
import type { AddressInfo } from "node:net"
import { pollPromise } from "../support/Poll.js"
import { Browser } from "./Browser.js"
import { api, assertAccessible, Atrium, assertNoJargon, checkPrerequisites, CREATOR_CODE, CREATOR_PHONE, person, platformWith, until } from "./support.js"

/**
 * What an expert does without anyone watching, on its pages in the studio (issue 43 item 5): a creator opens the
 * expert's Runs page and sees a background run started through the API, reads its events and cancels another;
 * adds a webhook (its secret shown once) that a local receiver answers, sees the delivery in the log and redelivers
 * it; and adds a schedule, a bad cron said in words first, then pauses it.
 */

checkPrerequisites()

/** Events said as a person reads them: none of the wire's names or keys. */
const WIRE = /output\.text\.delta|tool_call_id|"type"|in_progress|credits_charged|run_[0-9a-z]{6,}|whk_|dlv_|evt_/

describe("web app in Chromium: runs, webhooks and schedules of an expert", () => {
  // The receiver listens on 127.0.0.1, which the outbound rule refuses unless TOOL_ALLOWED_HOSTS names it.
  // A provider nothing answers ("down/gone") makes an expert fall back to the builtin model (the traces test's way).
  const MODEL_PROVIDERS = JSON.stringify({
    providers: [{ id: "down", kind: "openai-chat", base_url: "http://127.0.0.1:1/v1", api_key: "sk-never-used-0123456789", models: [{ id: "gone", input_per_1k: "1", output_per_1k: "2" }] }]
  })
  it.layer(platformWith({ TOOL_ALLOWED_HOSTS: "127.0.0.1", WEBHOOK_POLL: "200 millis", WEBHOOK_RETRY_BASE: "200 millis", MODEL_PROVIDERS }), { timeout: 120_000 })((it) => {
    it.scoped("Runs page → a background run's events → cancel; webhook with its secret once → delivery → Redeliver; schedule", () =>
      Effect.gen(function*() {
        const { url: base } = yield* Atrium
        const browser = yield* Browser
        const received: Array<{ headers: IncomingHttpHeaders; body: string }> = []
        const receiver = createServer((req, res) => {
          let body = ""
          req.on("data", (chunk: Buffer) => (body += chunk.toString()))
          req.on("end", () => {
            received.push({ headers: req.headers, body })
            res.writeHead(200, { "content-type": "text/plain" }).end("thanks from the receiver")
          })
        })
        yield* Effect.acquireRelease(
          Effect.async<void>((resume) => void receiver.listen(0, "127.0.0.1", () => resume(Effect.void))),
          () => Effect.sync(() => (receiver.closeAllConnections(), receiver.close()))
        )
        const hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`

        yield* Effect.promise(async () => {
          const creator = await person(browser, base, { phone: CREATOR_PHONE, code: CREATOR_CODE }, { credits: 100 })
          const page = creator.page
          const expert = await api(base, creator.token, "POST", "/v1/agents", { name: "Night Shift", category: "business" })
          const id = expert.identifier as string
          await api(base, creator.token, "PATCH", `/v1/agents/${id}`, {
            tools: [{ name: "calculator", permission: "allow" }, { name: "get_time", permission: "ask" }]
          })
          const background = (message: string) =>
            api(base, creator.token, "POST", "/v1/agents/run", { agent: id, message, background: true }) as Promise<{ id: string; status: string }>

          // --- Reached from the expert's page; before any run, the page says how to start one.
          await page.goto(`${base}/studio/${id}`)
          await page.getByRole("navigation", { name: "Expert pages" }).getByRole("link", { name: "Runs" }).click()
          await page.waitForURL(`${base}/studio/${id}/runs`)
          await page.getByTestId("runs-empty").getByText("POST /v1/agents/run").waitFor()

          // --- A run started through the API, in the background (202 at once), appears; its events read as text.
          const started = await background(`/tool calculator {"expression": "6*7"}`)
          assert.strictEqual(started.status, "queued")
          // Nothing clicked: the list reads itself again.
          const row = page.getByTestId("runs").getByRole("row").nth(1)
          await row.getByText("Completed").waitFor()
          assert.match(await row.innerText(), /Background run/)
          assert.match(await row.innerText(), /credits/)
          await row.getByRole("link").click()
          await page.waitForURL(new RegExp(`/studio/${id}/runs\\?run=${started.id}$`))
          const events = page.getByTestId("run-events")
          await events.getByText(/^Completed, .* credits charged\.$/).waitFor()
          await events.getByText(/Tool calculator\s*done\s*with expression 6\*7/).waitFor()
          await events.getByText("Result: result 42, expression 6*7").waitFor()
          await events.getByText(/calculator returned/).waitFor()
          await page.getByTestId("run-status").getByText("Completed").waitFor()
          const detail = await page.getByTestId("run").innerText()
          assert.notMatch(detail, WIRE, `the run's page shows the wire:\n${detail}`)
          await assertNoJargon(page)

          // --- A long run is cancelled from its page, and ends cancelled.
          const slow = await background("/slow 1000")
          await page.goto(`${base}/studio/${id}/runs?run=${slow.id}`)
          await page.getByTestId("run-events").getByText(/chunk 1/).waitFor()
          await page.getByRole("button", { name: "Cancel this run" }).click()
          await page.getByTestId("run-status").getByText("Cancelled", { exact: true }).waitFor()
          await page.getByTestId("run-events").getByText(/^Failed: /).waitFor()
          await page.getByRole("link", { name: "← All runs" }).click()
          await page.getByTestId("runs").getByRole("row").nth(1).getByText("Cancelled").waitFor()
          assert.strictEqual(await page.getByTestId("runs").getByRole("row").count(), 3, "a header and two runs")

          // --- A run waiting for an approval is answered from its page, and goes on.
          const asking = await background("/tool get_time {}")
          await page.goto(`${base}/studio/${id}/runs?run=${asking.id}`)
          await page.getByTestId("run-events").getByText(/^Waiting for your approval to run get_time/).waitFor()
          await assertAccessible(page, "a run waiting for an approval")
          await page.getByRole("button", { name: "Approve get_time" }).click()
          await page.getByTestId("run-events").getByText(/^Completed, /).waitFor()
          await page.getByTestId("run-events").getByText(/^Approved to run get_time/).waitFor()
          await page.getByTestId("run-events").getByText(/Tool get_time\s*done/).waitFor()

          // --- A webhook: the secret shown once, then never again.
          await page.getByRole("navigation", { name: "Expert pages" }).getByRole("link", { name: "Webhooks" }).click()
          await page.waitForURL(`${base}/studio/${id}/webhooks`)
          await page.getByTestId("webhooks-empty").waitFor()
          await page.getByRole("button", { name: "Add endpoint" }).click()
          await page.getByRole("alert").getByText(/^URL is not valid\. Write the full address/).waitFor()
          await page.getByLabel("Endpoint URL").fill(hookUrl)
          await page.getByLabel("Description (optional)").fill("My receiver")
          await page.getByRole("button", { name: "Add endpoint" }).click()
          const secretBox = page.getByRole("region", { name: "Signing secret" })
          const secret = (await secretBox.locator("code.secret").innerText()).trim()
          assert.match(secret, /^whsec_/)
          await assertAccessible(page, "the webhooks page with a secret shown")
          await secretBox.getByRole("button", { name: "I saved it" }).click()
          await page.reload()
          await page.getByTestId("webhook").getByRole("heading", { name: "My receiver" }).waitFor()
          assert.notInclude(await page.locator("body").innerText(), "whsec_", "the secret is shown once")
          assert.match(await page.getByTestId("webhook").innerText(), /Sends: A run completed, A run failed/)

          // A run's end reaches the receiver; the log shows it in words, and Redeliver sends it again.
          // (Told by the run's id: the end of a run before it, told a moment late, may come too.)
          const hello = await background("hello")
          const ofHello = () => received.filter((r) => r.body.includes(hello.id))
          await pollPromise(() => ofHello().length, (n) => n > 0, "the run's end delivered", { within: 10_000 })
          assert.strictEqual(ofHello().length, 1, "one delivery")
          assert.match(String(ofHello()[0]!.headers["webhook-signature"]), /^v1,/)
          await page.getByRole("button", { name: "Deliveries of My receiver" }).click()
          const log = page.getByTestId("deliveries")
          const first = log.getByRole("row").nth(1)
          await first.getByRole("rowheader", { name: /^A run completed/ }).waitFor()
          await first.getByText(/Delivered · answered 200/).waitFor()
          await first.getByText("thanks from the receiver").waitFor()
          assert.match(await first.innerText(), /\d+ ms/)
          await first.getByRole("button", { name: /^Redeliver/ }).click()
          await page.getByText("“A run completed” sent again.").waitFor()
          await pollPromise(() => ofHello().length, (n) => n >= 2, "the run's end redelivered", { within: 10_000 })
          assert.strictEqual(ofHello().length, 2, "redelivered")
          assert.strictEqual(ofHello()[1]!.headers["webhook-id"], ofHello()[0]!.headers["webhook-id"], "the same webhook-id")
          await page.getByRole("button", { name: "Refresh the deliveries" }).click()
          await until(page, "a delivery more, the newest sent again", () =>
            document.querySelectorAll("[data-testid=deliveries] tbody tr").length >= 2 &&
            (document.querySelector("[data-testid=deliveries] tbody tr")?.textContent ?? "").includes("sent again") &&
            (document.querySelector("[data-testid=deliveries] tbody tr")?.textContent ?? "").includes("Delivered"))
          await assertAccessible(page, "the delivery log")
          const logText = await page.getByTestId("webhook").innerText()
          assert.notMatch(logText, WIRE, `the delivery log shows the wire:\n${logText}`)

          // Edited, turned off, and a new secret (shown once again); the confirmations are accepted.
          page.on("dialog", (dialog) => void dialog.accept())
          await page.getByRole("button", { name: "Edit My receiver" }).click()
          await page.getByRole("form", { name: "Edit My receiver" }).getByLabel("Description").fill("Receiver on my laptop")
          await page.getByRole("form", { name: "Edit My receiver" }).getByLabel(/^A run was cancelled/).check()
          await page.getByRole("button", { name: "Save endpoint" }).click()
          await page.getByTestId("webhook").getByRole("heading", { name: "Receiver on my laptop" }).waitFor()
          assert.match(await page.getByTestId("webhook").innerText(), /Sends: A run completed, A run failed, A run was cancelled/)
          await page.getByRole("button", { name: "Turn off Receiver on my laptop" }).click()
          await page.getByTestId("webhook").getByText("Off (turned off by you)").waitFor()
          await page.getByRole("button", { name: "New secret for Receiver on my laptop" }).click()
          const rotated = (await page.getByRole("region", { name: "Signing secret" }).locator("code.secret").innerText()).trim()
          assert.match(rotated, /^whsec_/)
          assert.notStrictEqual(rotated, secret, "a new secret")
          await page.getByRole("button", { name: "I saved it" }).click()

          // --- A schedule: a bad cron and a bad zone in words, then a good one, paused.
          await page.getByRole("navigation", { name: "Expert pages" }).getByRole("link", { name: "Schedules" }).click()
          await page.waitForURL(`${base}/studio/${id}/schedules`)
          await page.getByTestId("schedules-empty").waitFor()
          await page.getByLabel(/^Cron/).fill("61 * * *")
          await page.getByLabel("Message sent at each run").fill("Write the morning report.")
          await page.getByRole("button", { name: "Add schedule" }).click()
          await page.getByRole("alert").getByText(/^Cron has 4 fields; it needs 5: minute hour/).waitFor()
          await page.getByLabel(/^Cron/).fill("61 * * * *")
          await page.getByRole("button", { name: "Add schedule" }).click()
          await page.getByRole("alert").getByText(/^Cron "61 \* \* \* \*" is not a schedule: .*minute 0-59/).waitFor()
          await page.getByLabel(/^Cron/).fill("0 9 * * 1-5")
          await page.getByLabel("Time zone").fill("Mars/Olympus")
          await page.getByRole("button", { name: "Add schedule" }).click()
          await page.getByRole("alert").getByText(/^Time zone "Mars\/Olympus" is not known/).waitFor()
          await assertNoJargon(page)
          await page.getByLabel("Time zone").fill("Europe/Paris")
          await page.getByLabel("Description (optional)").fill("Weekday report")
          await page.getByRole("button", { name: "Add schedule" }).click()
          await page.getByText(/^Schedule added: it first runs /).waitFor()
          const schedule = page.getByTestId("schedules").getByRole("listitem")
          await schedule.getByRole("heading", { name: "Weekday report" }).waitFor()
          assert.match(await schedule.innerText(), /Active · 0 9 \* \* 1-5 in Europe\/Paris · next run /)
          await schedule.getByRole("button", { name: "Pause Weekday report" }).click()
          await schedule.getByText("Paused", { exact: true }).waitFor()
          assert.match(await schedule.innerText(), /no next run while paused/)
          await schedule.getByRole("button", { name: "Resume Weekday report" }).waitFor()
          const listed = await api(base, creator.token, "GET", "/v1/schedules")
          assert.deepStrictEqual(listed.data.map((s: { status: string; timezone: string }) => [s.status, s.timezone]), [["paused", "Europe/Paris"]])
          // Deleted after a confirmation: the page says again what to do.
          await schedule.getByRole("button", { name: "Delete Weekday report" }).click()
          await page.getByTestId("schedules-empty").waitFor()
          assert.deepStrictEqual((await api(base, creator.token, "GET", "/v1/schedules")).data, [])
          await creator.context.close()
        })
      }))

    it.effect("Traces page: a run with a tool and a fallback as a timeline whose credits add up to the ledger; content kept only when turned on", () =>
      Effect.gen(function*() {
        const { url: base } = yield* Atrium
        const browser = yield* Browser
        yield* Effect.promise(async () => {
          const creator = await person(browser, base, { phone: CREATOR_PHONE, code: CREATOR_CODE }, { credits: 100 })
          const page = creator.page
          const expert = await api(base, creator.token, "POST", "/v1/agents", { name: "Traced Expert", category: "business" })
          const id = expert.identifier as string
          await api(base, creator.token, "PATCH", `/v1/agents/${id}`, {
            model: "down/gone",
            fallback_models: ["builtin"],
            tools: [{ name: "calculator", permission: "allow" }]
          })
          const finished = (runId: string) =>
            pollPromise(() => api(base, creator.token, "GET", `/v1/runs/${runId}`), (run) => !["queued", "in_progress"].includes(run.status), `run ${runId} ended`, {
              within: 20_000
            }) as Promise<{ id: string; status: string; credits_charged: number }>
          const started = await api(base, creator.token, "POST", "/v1/agents/run", { agent: id, message: `/tool calculator {"expression": "6*7"}`, background: true })
          const run = await finished(started.id)
          assert.strictEqual(run.status, "completed")

          // --- The list: reached from the tabs, one trace with its cost; opened, a tree of the run's steps.
          await page.goto(`${base}/studio/${id}`)
          await page.getByRole("navigation", { name: "Expert pages" }).getByRole("link", { name: "Traces" }).click()
          await page.waitForURL(`${base}/studio/${id}/traces`)
          const rows = page.getByTestId("traces").locator("tbody tr")
          await until(page, "the run's trace listed", () => document.querySelectorAll("[data-testid=traces] tbody tr").length === 1)
          assert.match(await rows.first().innerText(), /Succeeded[\s\S]*Yours[\s\S]*calculator/)
          await rows.first().getByRole("link").click()
          await page.getByTestId("trace").waitFor()
          await assertNoJargon(page)
          const names = await page.getByTestId("span").locator("summary strong").allInnerTexts()
          assert.strictEqual(names[0], `invoke_agent ${id}`)
          assert.includeMembers(names, ["execute_tool calculator", "chat down/gone", "chat builtin"])

          // --- Its credits: each step's, summed, are the run's charge and the ledger's lines for it, to the micro-credit.
          const micros = (n: number | string) => Math.round(Number(n) * 1_000_000)
          const spanCredits = await page.getByTestId("span-credits").evaluateAll((els) => els.map((el) => el.getAttribute("data-credits") ?? ""))
          const summed = spanCredits.reduce((sum, c) => sum + micros(c), 0)
          const shown = micros(await page.getByTestId("trace-credits").getAttribute("data-credits") ?? "NaN")
          const ledger = await api(base, creator.token, "GET", "/api/wallet/ledger?limit=200")
          const charged = (ledger.data as Array<{ amount: number; description: string | null }>)
            .filter((line) => (line.description ?? "").startsWith(`Run of ${id} `))
            .reduce((sum, line) => sum + Math.abs(micros(line.amount)), 0)
          assert.isAbove(charged, 0)
          assert.deepStrictEqual([summed, shown, micros(run.credits_charged)], [charged, charged, charged])

          // --- No content unless the creator keeps it: the model call says so; turned on in the editor, the next trace has it.
          await page.getByTestId("trace").locator("summary").filter({ hasText: "chat builtin" }).first().click()
          await page.locator("details[open]").getByText("Message content is not kept for this expert.").first().waitFor()
          await assertAccessible(page, "a trace opened")
          await page.goto(`${base}/studio/${id}`)
          await page.getByLabel(/Keep message content in traces/).check()
          await page.getByRole("button", { name: "Save draft" }).click()
          await page.getByText("Saved.").waitFor()
          assert.strictEqual((await api(base, creator.token, "GET", `/v1/agents/${id}`)).trace_content, true)
          // The tracer reads the setting within 5 s (docs/traces.md); runs until one keeps what was said.
          // Polled: a run, then its trace (written within 2 s of its end), until a trace keeps what was said.
          const traceOf = (runId: string) =>
            pollPromise(
              () => fetch(`${base}/v1/runs/${runId}/trace`, { headers: { authorization: `Bearer ${creator.token}` } }),
              (trace) => trace.status === 200,
              `the trace of ${runId}`,
              { within: 4_000 }
            ).then((trace) => trace.json())
          const kept = await pollPromise(
            async () => {
              const next = await finished((await api(base, creator.token, "POST", "/v1/agents/run", { agent: id, message: "say zebra-lantern", background: true })).id)
              return JSON.stringify(await traceOf(next.id)).includes("zebra-lantern") ? next.id : undefined
            },
            (runId) => runId !== undefined,
            "a trace that keeps what was said once the creator turned it on",
            { every: 500, within: 20_000 }
          )
          await page.goto(`${base}/studio/${id}/traces?trace=${kept}`)
          await page.getByTestId("trace").locator("summary").filter({ hasText: "chat builtin" }).first().click()
          await page.locator(".span-content").filter({ hasText: "zebra-lantern" }).first().waitFor()
          await creator.context.close()
        })
      }))
  })
})
