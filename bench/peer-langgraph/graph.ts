/**
 * Graph `agent` of the peer comparison: one node over MessagesAnnotation that calls a fake chat model. The model
 * answers like Atrium's builtin model does (`You said: <the last user message>`), streamed as the same pieces, the
 * words in groups of three: for "hello there, world of agents" that is exactly 3 chunks ("You said: hello ",
 * "there, world of ", "agents"). No network, no real model, no sleeps.
 */
import { BaseChatModel } from "@langchain/core/language_models/chat_models"
import type { CallbackManagerForLLMRun } from "@langchain/core/callbacks/manager"
import { AIMessage, AIMessageChunk, type BaseMessage } from "@langchain/core/messages"
import { ChatGenerationChunk, type ChatResult } from "@langchain/core/outputs"
import { MessagesAnnotation, StateGraph } from "@langchain/langgraph"

/** The words of a text in groups of three, each group keeping its trailing space (as Atrium's builtin model). */
const pieces = (text: string): Array<string> => {
  const words = text.match(/\S+\s*/g) ?? [text]
  const out: Array<string> = []
  for (let i = 0; i < words.length; i += 3) out.push(words.slice(i, i + 3).join(""))
  return out
}

const answerTo = (messages: ReadonlyArray<BaseMessage>): string => {
  const last = [...messages].reverse().find((m) => m.getType() === "human")
  const text = typeof last?.content === "string" ? last.content : JSON.stringify(last?.content ?? "")
  return `You said: ${text}`
}

class EchoChatModel extends BaseChatModel {
  _llmType(): string {
    return "atrium-bench-echo"
  }

  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const text = answerTo(messages)
    return { generations: [{ text, message: new AIMessage(text) }] }
  }

  override async *_streamResponseChunks(
    messages: BaseMessage[],
    _options: this["ParsedCallOptions"],
    runManager?: CallbackManagerForLLMRun
  ): AsyncGenerator<ChatGenerationChunk> {
    for (const piece of pieces(answerTo(messages))) {
      const chunk = new ChatGenerationChunk({ text: piece, message: new AIMessageChunk({ content: piece }) })
      yield chunk
      await runManager?.handleLLMNewToken(piece, undefined, undefined, undefined, undefined, { chunk })
    }
  }
}

const model = new EchoChatModel({})

export const graph = new StateGraph(MessagesAnnotation)
  .addNode("model", async (state) => ({ messages: [await model.invoke(state.messages)] }))
  .addEdge("__start__", "model")
  .addEdge("model", "__end__")
  .compile()
