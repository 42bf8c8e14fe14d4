/**
 * The messages a chat page sends, in the order they were typed.
 *
 * A new conversation is created by its first message, once: the messages typed while it is being created go to the
 * same conversation. (Each used to create its own while the page did not know the first one's yet, so three quick
 * messages could make two or three conversations, and the page followed only one of them.)
 *
 * Each message is sent once the one before it was accepted (the send's answer, which the session gives once it has
 * numbered the turn): the session numbers turns in the order messages arrive, and two requests in flight at once may
 * arrive either way round.
 */
export interface Outbox {
  /**
   * Sends `text` to the conversation `id`, or with `null` to the new conversation (created by the first such
   * message). Resolves once it is sent, with the failure if it could not be (never rejects).
   */
  readonly deliver: (id: string | null, text: string) => Promise<Error | undefined>
  /** The page starts another new conversation: the next message without one creates it. */
  readonly reset: () => void
}

export interface OutboxPorts {
  /** Creates the conversation whose first message is `text`; its id. */
  readonly create: (text: string) => Promise<string>
  /** Sends `text` to the conversation `id`; resolves once the session has accepted it. */
  readonly send: (id: string, text: string) => Promise<void>
}

export const makeOutbox = (ports: OutboxPorts): Outbox => {
  let creating: Promise<string> | null = null
  let previous: Promise<unknown> = Promise.resolve()

  const conversation = (id: string | null, text: string): Promise<string> => {
    if (id !== null) return Promise.resolve(id)
    if (creating === null) {
      const created = ports.create(text)
      creating = created
      // Not kept when it failed: the next message (or its Retry) creates the conversation again.
      created.catch(() => {
        if (creating === created) creating = null
      })
    }
    return creating
  }

  return {
    deliver: (id, text) => {
      // Created at once, not after the messages before it: a message to the new conversation waits only for it.
      const target = conversation(id, text)
      const delivery = previous.then(async () => {
        try {
          await ports.send(await target, text)
          return undefined
        } catch (failure) {
          return failure instanceof Error ? failure : new Error(String(failure))
        }
      })
      previous = delivery
      return delivery
    },
    reset: () => {
      creating = null
    }
  }
}
