import { assert, describe, it } from "@effect/vitest"
import { makeOutbox } from "../../web/src/chat/outbox.js"

/**
 * The chat page's outbox (web/src/chat/outbox.ts): the order of its messages and the one conversation they create,
 * on ports whose answers the test holds and releases, so every interleaving is chosen here rather than by timing.
 */

interface Held<A> {
  readonly promise: Promise<A>
  readonly resolve: (value: A) => void
  readonly reject: (error: Error) => void
}

const held = <A>(): Held<A> => {
  let resolve!: (value: A) => void
  let reject!: (error: Error) => void
  const promise = new Promise<A>((ok, fail) => {
    resolve = ok
    reject = fail
  })
  return { promise, resolve, reject }
}

/** Lets every callback already due run (the outbox's chain is a few promise steps long). */
const settle = () => new Promise((resolve) => setTimeout(resolve, 0))

/** Ports that record each call and answer only when the test says so. */
const ports = () => {
  const creates: Array<{ text: string; answer: Held<string> }> = []
  const sends: Array<{ id: string; text: string; answer: Held<void> }> = []
  return {
    creates,
    sends,
    ports: {
      create: (text: string) => {
        const answer = held<string>()
        creates.push({ text, answer })
        return answer.promise
      },
      send: (id: string, text: string) => {
        const answer = held<void>()
        sends.push({ id, text, answer })
        return answer.promise
      }
    }
  }
}

describe("chat outbox", () => {
  it("messages typed while the conversation is being created go to it: one creation, not one per message", async () => {
    const { creates, ports: p, sends } = ports()
    const outbox = makeOutbox(p)
    const delivered = ["first", "second", "third"].map((text) => outbox.deliver(null, text))
    await settle()
    assert.deepStrictEqual(creates.map((c) => c.text), ["first"])
    assert.lengthOf(sends, 0, "nothing is sent before the conversation exists")
    creates[0]!.answer.resolve("ses_1")
    for (let i = 0; i < 3; i++) {
      await settle()
      sends[i]!.answer.resolve()
    }
    assert.deepStrictEqual(await Promise.all(delivered), [undefined, undefined, undefined])
    assert.deepStrictEqual(sends.map((s) => [s.id, s.text]), [["ses_1", "first"], ["ses_1", "second"], ["ses_1", "third"]])
    // The page re-rendered too late to know the id yet: still the same conversation.
    const late = outbox.deliver(null, "fourth")
    await settle()
    sends[3]!.answer.resolve()
    assert.isUndefined(await late)
    assert.lengthOf(creates, 1)
    assert.strictEqual(sends[3]!.id, "ses_1")
  })

  it("each message is sent once the one before it was accepted, so the session numbers them in the order typed", async () => {
    const { ports: p, sends } = ports()
    const outbox = makeOutbox(p)
    const delivered = ["first", "second", "third"].map((text) => outbox.deliver("ses_1", text))
    await settle()
    assert.deepStrictEqual(sends.map((s) => s.text), ["first"], "the second waits for the first's answer")
    sends[0]!.answer.resolve()
    await settle()
    assert.deepStrictEqual(sends.map((s) => s.text), ["first", "second"])
    // A refused message does not hold back the next; it is reported as not sent.
    sends[1]!.answer.reject(new Error("Not enough credits"))
    await settle()
    assert.deepStrictEqual(sends.map((s) => s.text), ["first", "second", "third"])
    sends[2]!.answer.resolve()
    const outcomes = await Promise.all(delivered)
    assert.deepStrictEqual(outcomes.map((o) => o?.message), [undefined, "Not enough credits", undefined])
  })

  it("a failed creation fails the messages that waited for it, and the next message (or Retry) creates again", async () => {
    const { creates, ports: p, sends } = ports()
    const outbox = makeOutbox(p)
    const waiting = [outbox.deliver(null, "first"), outbox.deliver(null, "second")]
    await settle()
    creates[0]!.answer.reject(new Error("offline"))
    assert.deepStrictEqual((await Promise.all(waiting)).map((o) => o?.message), ["offline", "offline"])
    assert.lengthOf(sends, 0)
    const retry = outbox.deliver(null, "first")
    await settle()
    assert.deepStrictEqual(creates.map((c) => c.text), ["first", "first"])
    creates[1]!.answer.resolve("ses_2")
    await settle()
    sends[0]!.answer.resolve()
    assert.isUndefined(await retry)
    assert.deepStrictEqual(sends.map((s) => [s.id, s.text]), [["ses_2", "first"]])
  })

  it("after New chat (reset) the next message without a conversation creates another one", async () => {
    const { creates, ports: p, sends } = ports()
    const outbox = makeOutbox(p)
    const first = outbox.deliver(null, "hello")
    await settle()
    creates[0]!.answer.resolve("ses_1")
    await settle()
    sends[0]!.answer.resolve()
    await first
    outbox.reset()
    const second = outbox.deliver(null, "again")
    await settle()
    assert.deepStrictEqual(creates.map((c) => c.text), ["hello", "again"])
    creates[1]!.answer.resolve("ses_2")
    await settle()
    sends[1]!.answer.resolve()
    await second
    assert.deepStrictEqual(sends.map((s) => s.id), ["ses_1", "ses_2"])
  })
})
