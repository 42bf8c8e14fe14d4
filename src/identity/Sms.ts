import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { AppConfig } from "../platform/Config.js"

export class SmsDeliveryFailed extends Schema.TaggedError<SmsDeliveryFailed>()("SmsDeliveryFailed", {
  message: Schema.String
}) {}

/** The port an SMS leaves through. `console` is for development; `http` posts to a provider's gateway. */
export interface SmsSenderService {
  readonly send: (phone: string, text: string) => Effect.Effect<void, SmsDeliveryFailed>
}

export class SmsSender extends Context.Tag("atrium/identity/SmsSender")<SmsSender, SmsSenderService>() {}

/** Prints the message, code included, on one line: the development stand-in for a phone. */
export const ConsoleSmsSender = Layer.succeed(SmsSender, {
  send: (phone, text) => Effect.logInfo(`SMS to ${phone}: ${text}`)
})

/**
 * POSTs `{"to","text"}` as JSON to `SMS_HTTP_URL` with `Authorization: Bearer SMS_HTTP_TOKEN`; any 2xx is
 * delivered. Gateways with other shapes sit behind a small adapter at that URL.
 */
export const HttpSmsSender = Layer.effect(
  SmsSender,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const url = yield* Option.match(config.sms.httpUrl, {
      onNone: () => Effect.dieMessage("SMS_PROVIDER=http needs SMS_HTTP_URL"),
      onSome: Effect.succeed
    })
    const client = (yield* HttpClient.HttpClient).pipe(HttpClient.filterStatusOk)
    return {
      send: (phone, text) =>
        HttpClientRequest.post(url).pipe(
          HttpClientRequest.bodyUnsafeJson({ to: phone, text }),
          Option.match(config.sms.httpToken, {
            onNone: () => (request: HttpClientRequest.HttpClientRequest) => request,
            onSome: (token) => HttpClientRequest.bearerToken(Redacted.value(token))
          }),
          client.execute,
          Effect.timeout("10 seconds"),
          Effect.scoped,
          Effect.asVoid,
          Effect.mapError((cause) => new SmsDeliveryFailed({ message: `SMS gateway: ${cause._tag}` }))
        )
    }
  })
).pipe(Layer.provide(NodeHttpClient.layerUndici))

export const SmsSenderLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) => (config.sms.provider === "http" ? HttpSmsSender : ConsoleSmsSender))
).pipe(Layer.provide(AppConfig.Default))
