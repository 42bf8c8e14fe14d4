import { Effect } from "effect"
import OpenAI from "openai"
import { TestServer } from "../support/TestServer.js"

/** An official `openai` client for the test server, counting the HTTP requests it really makes. */
export const openAiClient = (apiKey: string, options: { endUser?: string; maxRetries?: number } = {}) =>
  Effect.map(TestServer, (server) => {
    const calls: Array<string> = []
    const client = new OpenAI({
      baseURL: `${server.url}/v1`,
      apiKey,
      maxRetries: options.maxRetries ?? 0,
      defaultHeaders: { "X-End-User-Id": options.endUser ?? "u1" },
      fetch: (input: any, init?: any) => {
        calls.push(`${init?.method ?? "GET"} ${String(input instanceof Request ? input.url : input)}`)
        return fetch(input, init)
      }
    })
    return { client, calls, url: server.url }
  })

/** The error a promise rejects with (a test fails if it resolves). */
export const rejection = <A>(promise: () => Promise<A>) =>
  Effect.promise(() =>
    promise().then(
      (value) => {
        throw new Error(`expected a rejection, got ${JSON.stringify(value).slice(0, 300)}`)
      },
      (error: unknown) => error
    )
  )

export const WEATHER: OpenAI.Chat.Completions.ChatCompletionTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
  }
}
