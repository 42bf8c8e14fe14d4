import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Browser } from "./Browser.js"
import { api, assertAccessible, assertNoJargon, Atrium, checkPrerequisites, CREATOR_CODE, CREATOR_PHONE, internal, person, Platform, until } from "./support.js"

/**
 * An expert's evaluations in the studio (issue 46 item 3): a dataset made and filled on the Evals tab, an eval run of
 * the draft with its pass rate and each row's trace, and the publish gate: a draft that answers worse than the live
 * version cannot be submitted from the editor, said in words.
 */

checkPrerequisites()

describe("web app in Chromium: evals", () => {
  it.layer(Platform, { timeout: 180_000 })((it) => {
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
          await results.getByRole("link", { name: "Open the trace of row 1" }).click()
          await page.getByTestId("trace").waitFor()

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
          await creator.context.close()
        })
      }))
  })
})
