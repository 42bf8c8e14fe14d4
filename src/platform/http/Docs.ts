import type * as HttpApi from "@effect/platform/HttpApi"
import * as HttpLayerRouter from "@effect/platform/HttpLayerRouter"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Context, Effect, Layer, Scope } from "effect"
import { pageHeaders } from "./Csp.js"

/**
 * The interactive API explorer at `/docs/explorer` (the reference itself is `/docs`, platform/http/Reference.ts),
 * built on its first request: Scalar's bundle is 6 MB of module source and its page 6 MB more,
 * a twentieth of the process's idle memory for a page few deployments ever open.
 */
export const makeDocsRoute = (api: HttpApi.HttpApi.Any) => HttpLayerRouter.use(Effect.fnUntraced(function*(router) {
  const scope = yield* Effect.scope
  const docs = yield* Effect.cached(
    Effect.promise(() => import("@effect/platform/HttpApiScalar")).pipe(
      // A router of its own (Layer.build, not the app's memo map, which would hand back the platform's router).
      Effect.flatMap((Scalar) =>
        // Scalar's default fonts come from fonts.scalar.com: the page uses the system's, and loads nothing from
        // another host (its policy, `withPagePolicy`, would refuse it anyway).
        Layer.build(Layer.provideMerge(
          Scalar.layerHttpLayerRouter({ api, path: "/docs/explorer", scalar: { withDefaultFonts: false } }),
          HttpLayerRouter.layer
        ))
      ),
      Effect.map((context) => Context.get(context, HttpLayerRouter.HttpRouter).asHttpEffect()),
      Scope.extend(scope)
    )
  )
  /**
   * The page policy of the reference (platform/http/Csp.ts), computed once from the page Scalar wrote: its bundle
   * and configuration run by hash, and it compiles WebAssembly (`'wasm-unsafe-eval'`, not JavaScript's eval).
   */
  const withPolicy = yield* Effect.cached(Effect.map(Effect.flatten(docs), (page) =>
    page.body._tag === "Uint8Array" ? pageHeaders(new TextDecoder().decode(page.body.body), true) : pageHeaders("", true)))
  yield* router.add("GET", "/docs/explorer", Effect.orDie(Effect.zipWith(Effect.flatten(docs), withPolicy, HttpServerResponse.setHeaders)))
}))
