import * as HttpApi from "@effect/platform/HttpApi"
import { AtriumApi } from "../../src/Api.js"

/**
 * Which POSTs of the contract create something (DESIGN.md §6: `Idempotency-Key` on every create), read from the
 * HttpApi itself rather than from a status code: OpenAI's vector stores create and answer 200, and a 201 says
 * nothing about a POST that answers 200 (issue 42 item 5). Every POST is a create unless it is named below with
 * the reason it is not; a POST added to the contract is a create until someone says otherwise here.
 */

/** POSTs that make nothing a retry could make twice, each with why (`group.endpoint`). */
export const NOT_CREATES: Readonly<Record<string, string>> = {
  "auth.sendCode": "sends a login code; its own cooldown and daily limit bound a retry",
  "auth.login": "exchanges a code for a token, once (the code is used up)",
  "account.refresh": "a new token in place of the old one; nothing is added",
  "account.listApiKeys": "a read (the spec's POST)",
  "account.deleteApiKey": "a deletion; a retry finds it gone",
  "events.report": "a charge, idempotent by the `idempotency_key` in its body, kept in the ledger for good",
  "credits.preCheck": "a read",
  "credits.consume": "a charge, idempotent by the `idempotency_key` in its body",
  "paymentNotify.notify": "the provider's callback, idempotent by its order id",
  "internalBilling.grant": "a grant, idempotent by the `idempotency_key` in its body",
  "agents.publish": "a change of state; a retry finds the agent already submitted",
  "agents.restoreVersion": "the draft becomes a copy of a version: a retry writes the same draft again",
  "runs.run": "starts a run: its `Idempotency-Key` attaches a retry to the first run (Attach.ts, docs/runs.md)",
  "runs.chatCompletions": "starts a run: its `Idempotency-Key` attaches a retry to the first run (Attach.ts)",
  "runs.cancelRun": "a change of state, idempotent: a second cancel answers the run as the first left it",
  "wallet.testCheckout": "settles an order, once: a paid order stays paid (the test provider's stand-in for a webhook)",
  "runs.answerApproval": "answers an approval once; a second answer is refused",
  "responses.create": "starts a run: its `Idempotency-Key` attaches a retry to the first run (Attach.ts)",
  "responses.cancel": "a change of state",
  "sessions.send": "a turn: its `Idempotency-Key` attaches a retry to the first turn (Attach.ts, docs/sessions.md)",
  "sessions.interrupt": "a change of state",
  "sessions.adopt": "a change of owner; a retry finds it adopted",
  "sessions.attach": "writes a file at a path named by the request: a retry writes the same file again, nothing is added",
  "purchases.purchase": "an unlock, idempotent by its ledger key (purchase, buyer:agent: docs/agents.md)",
  "reviews.approve": "a decision on a review",
  "reviews.reject": "a decision on a review",
  "files.uploadUrl": "hands out a signed URL and keeps nothing but its pending upload, which expires unused",
  "knowledge.update": "a change of a store's name or metadata (OpenAI's POST for an update)",
  "knowledge.search": "a read",
  "notifications.read": "marks a notification read",
  "creatorReviews.approve": "a decision on an application",
  "creatorReviews.reject": "a decision on an application",
  "admin.approveSubmission": "a decision on a submission",
  "admin.rejectSubmission": "a decision on a submission",
  "admin.feature": "a change of state; featuring again finds it featured",
  "admin.unfeature": "a change of state; a second finds it off the list",
  "admin.approveApplication": "a decision on an application",
  "admin.rejectApplication": "a decision on an application",
  "evolution.accept": "a decision on a suggestion; a second is refused",
  "evolution.dismiss": "a decision on a suggestion",
  "distillations.message": "a turn of a conversation, one at a time (distillation_busy); `create` makes its draft once",
  "webhooks.create":
    "honours `Idempotency-Key` itself, kept beside the endpoint, so a replay answers the secret again without the answer stored in clear (src/webhooks/Webhooks.ts; test/webhooks)",
  "webhooks.rotateSecret": "a new secret in place of the old one; nothing is added",
  "webhooks.redeliver": "sends a delivery again on purpose; its receiver dedupes by the stable `webhook-id`",
  "internalWebhooks.emit": "an operator's event, idempotent by the `idempotency_key` in its body",
  "schedules.pause": "a change of state; a second pause finds it paused",
  "schedules.resume": "a change of state; a second resume finds it active",
  "evals.cancelRun": "a change of state, idempotent: a second cancel answers the eval run as the first left it",
  "evals.fromRun": "adds a run once (its id is the row's source), so a retry adds nothing",
  "evals.fromFeedback": "adds each shared thumbs-down once (its session and turn are the row's source), so a retry adds nothing"
}

/** Creates left without `Idempotency-Key` on purpose: their answer holds a secret shown once, which a replay would show again. */
export const SECRET_ONCE: Readonly<Record<string, string>> = {
  "apps.create": "the app's client secret",
  "account.createApiKey": "the API key itself"
}

export interface Post {
  /** `group.endpoint`, as the contract names it. */
  readonly name: string
  /** The path as the contract writes it (`/api/apps/:id/meters`). */
  readonly path: string
}

/** Every POST of the platform's contract. */
export const posts = (): ReadonlyArray<Post> => {
  const found: Array<Post> = []
  HttpApi.reflect(AtriumApi as unknown as HttpApi.HttpApi.AnyWithProps, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, group }) => {
      if (endpoint.method === "POST") found.push({ name: `${group.identifier}.${endpoint.name}`, path: endpoint.path })
    }
  })
  return found
}

/** The POSTs that create something: every POST but those named in `NOT_CREATES` and `SECRET_ONCE`. */
export const creates = (): ReadonlyArray<Post> => posts().filter((post) => !(post.name in NOT_CREATES) && !(post.name in SECRET_ONCE))
