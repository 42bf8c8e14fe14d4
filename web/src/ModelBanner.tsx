import { useEffect, useState } from "react"
import { call, itemsOf } from "./api.js"

let known: Promise<boolean> | undefined

/**
 * Whether a real model is connected: `GET /v1/models` names each model's `provider_kind`, and out of the box the
 * only one is the offline `builtin`, which echoes. Asked once per page load.
 */
const onlyBuiltin = (): Promise<boolean> => {
  known ??= call((c) => c.models.list({ urlParams: {} })).then(
    (list) => {
      const models = itemsOf<{ provider: string; provider_kind: string }>(list).filter((m) => m.provider !== "agent")
      return models.length > 0 && models.every((m) => m.provider_kind === "builtin")
    },
    () => false
  )
  return known
}

/** Says, while only the builtin model is configured, that answers are echoes and how to connect a model. */
export const ModelBanner = () => {
  const [show, setShow] = useState(false)
  useEffect(() => {
    let live = true
    void onlyBuiltin().then((only) => live && setShow(only))
    return () => {
      live = false
    }
  }, [])
  if (!show) return null
  return (
    <p className="notice model-banner" data-testid="model-banner">
      <strong>No AI model is connected yet.</strong> This platform runs only its built-in demo model, which repeats what
      you write. An operator connects a real one with the <code>MODEL_PROVIDER</code> or <code>MODEL_PROVIDERS</code>{" "}
      settings (README, &ldquo;Connect a model&rdquo;).
    </p>
  )
}
