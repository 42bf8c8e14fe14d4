import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Browser } from "./Browser.js"
import { api, assertAccessible, assertNoJargon, Atrium, checkPrerequisites, CREATOR_CODE, CREATOR_PHONE, internal, OPERATOR_CODE, OPERATOR_PHONE, person, Platform, until } from "./support.js"

/**
 * An expert's evaluations in the studio (issue 46 item 3): a dataset made and filled on the Evals tab, an eval run of
 * the draft with its pass rate and each row's trace, and the publish gate: a draft that answers worse than the live
 * version cannot be submitted from the editor, said in words.
 */

checkPrerequisites()

describe("web app in Chromium: evals", () => {
  it.layer(Platform, { timeout: 300_000 })((it) => {
    it.effect("a dataset, an eval run with its results and traces; the gate refuses a worse draft's Publish in the editor", () =>
      Effect.gen(function*() {
        const { url: base } = yield* Atrium
        const browser = yield* Browser
        yield* Effect.promise(async () => {
          const creator = await person(browser, base, { phone: CREATOR_PHONE, code: CREATOR_CODE }, { credits: 100 })
          const page = creator.page
          // `/system` makes the builtin model answer with the expert's instructions: changing them changes the answers.
          const created = await api(base, creator.token, "POST", "/v1/agents", { name: "Graded Expert", category: "business" })
          const id = created.identifier as string
          await api(base, creator.token, "PATCH", `/v1/agents/${id}`, { description: "For the evals test.", instructions: "Be exact." })
          const { submission } = await api(base, creator.token, "POST", `/v1/agents/${id}/publish`)
          await internal(base, `/internal/reviews/${submission.id}/approve`)

          // --- A dataset made on the Evals tab, its rows pasted as JSON lines.
          await page.goto(`${base}/studio/${id}`)
          await page.getByRole("navigation", { name: "Expert pages" }).getByRole("link", { name: "Evals" }).click()
          await page.waitForURL(`${base}/studio/${id}/evals`)
          await page.getByLabel("New dataset").fill("Checks")
          await page.getByRole("button", { name: "Create dataset" }).click()
          await page.getByText("Dataset “Checks” created").waitFor()
          await page.getByLabel("Rows", { exact: true }).fill([
            JSON.stringify({ input: "/system", contains: "exact" }),
            JSON.stringify({ input: "hello", contains: "You said: hello" })
          ].join("\n"))
          await page.getByRole("button", { name: "Add rows to Checks" }).click()
          await page.getByText("Added 2 rows.").waitFor()

          // --- An eval of the draft (the live version's configuration): both rows pass; each row opens its trace.
          await page.getByRole("button", { name: "Run the eval" }).click()
          await page.getByText(/Eval started on the draft: about .* credits for 2 rows\./).waitFor()
          const runs = page.getByTestId("eval-runs")
          await until(page, "the eval finished", () => (document.querySelector("[data-testid=eval-runs] tbody tr")?.textContent ?? "").includes("Finished"))
          assert.match(await runs.locator("tbody tr").first().innerText(), /the draft[\s\S]*Finished[\s\S]*100%[\s\S]*2 of 2/)
          const results = page.getByTestId("eval-results")
          await until(page, "two results", () => (document.querySelector("[data-testid=eval-results]")?.textContent ?? "").split("Passed").length === 3)
          await assertNoJargon(page)
          await assertAccessible(page, "the Evals tab with a run's results")
          // --- "Add to dataset" from a trace: the row's question, its answer as the expected one, edited first.
          const traced = await api(base, creator.token, "POST", "/v1/evals/datasets", { agent: id, name: "From traces" })
          await results.getByRole("link", { name: "Open the trace of row 1" }).click()
          await page.getByTestId("trace").waitFor()
          const expected = page.getByLabel("A good answer")
          await until(page, "the answer prefilled", () => (document.querySelector("[data-testid=add-to-dataset] textarea")?.value ?? "") !== "")
          assert.strictEqual(await expected.inputValue(), "Be exact.")
          await page.getByRole("combobox", { name: /^Dataset/ }).selectOption({ label: "From traces" })
          await expected.fill("Be exact, always.")
          await page.getByRole("button", { name: "Add to dataset" }).click()
          await page.getByText("Added to “From traces”.").waitFor()
          const added = await api(base, creator.token, "GET", `/v1/evals/datasets/${traced.id}/rows`)
          assert.deepInclude(added.data[0], { input: "/system", expected: "Be exact, always.", source: "trace" })
          await page.getByRole("button", { name: "Add to dataset" }).click()
          await page.getByText("This run is already in “From traces”.").waitFor()
          await assertNoJargon(page)

          // --- Cancel a running eval: its rows stop, it says so, and it is cancelled.
          const slow = await api(base, creator.token, "POST", "/v1/evals/datasets", { agent: id, name: "Slow" })
          await api(base, creator.token, "POST", `/v1/evals/datasets/${slow.id}/rows`, [{ input: "/slow 300" }, { input: "/slow 300" }, { input: "/slow 300" }])
          await page.goto(`${base}/studio/${id}/evals`)
          await page.getByRole("button", { name: "Open Slow" }).click()
          await page.getByRole("button", { name: "Run the eval" }).click()
          await page.getByText(/Eval started on the draft/).waitFor()
          await page.getByTestId("eval-runs").getByRole("button", { name: /^Cancel the eval run/ }).click()
          await page.getByText(/Eval cancelled after 0 of 3 rows/).waitFor()
          await until(page, "the eval shows cancelled", () => (document.querySelector("[data-testid=eval-runs] tbody tr")?.textContent ?? "").includes("Cancelled"))
          assert.strictEqual(await page.getByTestId("eval-runs").getByRole("button", { name: /^Cancel the eval run/ }).count(), 0)
          const cancelledRuns = await api(base, creator.token, "GET", `/v1/evals/runs?dataset=${slow.id}`)
          assert.strictEqual(cancelledRuns.data[0].status, "cancelled")
          await assertNoJargon(page)

          // --- The gate: this dataset, no drop allowed. A draft that answers worse, evaluated, cannot be published.
          await page.goto(`${base}/studio/${id}/evals`)
          await page.getByRole("button", { name: "Open Checks" }).click()
          await page.getByLabel("Allowed drop (%)").fill("0")
          await page.getByRole("button", { name: "Make Checks the publish gate" }).click()
          await page.getByTestId("gate").waitFor()
          assert.deepStrictEqual((await api(base, creator.token, "GET", `/v1/agents/${id}`)).eval_gate?.threshold, 0)
          await api(base, creator.token, "PATCH", `/v1/agents/${id}`, { instructions: "Be sloppy." })
          await page.getByRole("button", { name: "Run the eval" }).click()
          await until(page, "the second eval finished at 50%", () => {
            const row = document.querySelector("[data-testid=eval-runs] tbody tr")?.textContent ?? ""
            return row.includes("Finished") && row.includes("50%")
          })
          await page.goto(`${base}/studio/${id}`)
          await page.getByRole("button", { name: "Publish" }).click()
          const refusal = page.getByRole("alert")
          await refusal.waitFor()
          assert.match(await refusal.innerText(), /below the live version/)
          await assertNoJargon(page)
          assert.isNull((await api(base, creator.token, "GET", `/v1/agents/${id}`)).pending_submission, "nothing was submitted")

          // --- Back to the live version's answers: the gate lets it through, and the review console shows its scorecard.
          await api(base, creator.token, "PATCH", `/v1/agents/${id}`, { instructions: "Be exact." })
          const resubmitted = await api(base, creator.token, "POST", `/v1/agents/${id}/publish`)
          assert.strictEqual(resubmitted.submission.version, 2)
          const operator = await person(browser, base, { phone: OPERATOR_PHONE, code: OPERATOR_CODE })
          const desk = operator.page
          await desk.goto(`${base}/admin`)
          await desk.getByRole("button", { name: "Review Graded Expert" }).click()
          const card = desk.getByTestId("scorecard")
          await card.waitFor()
          const text = await card.innerText()
          assert.match(text, /Dataset “Checks”; a drop of at most 0% from the live version is allowed\. This version passes as many rows or more\./)
          assert.match(text, /Submitted \(version 2\)\s+100%\s+2 of 2\s+[\d.]+ credits\s+Eval run evr_/)
          assert.match(text, /Live \(version 1\)\s+100%\s+2 of 2/)
          await assertNoJargon(desk)
          await assertAccessible(desk, "the review console with a gate's scorecard")
          await operator.context.close()
          await creator.context.close()
        })
      }))
  })
})
