import { useState, type ChangeEvent } from "react"
import { call } from "../api.js"

const MAX_BYTES = 256 * 1024

/** The file's bytes as base64 (what `PUT /v1/agents/:identifier/icon` takes: cookie-authenticated changes are JSON). */
const base64Of = (file: File) =>
  new Promise<string>((resolve, reject) => {
    const reader = new FileReader()
    reader.onload = () => resolve(String(reader.result).replace(/^data:[^,]*,/, ""))
    reader.onerror = () => reject(new Error("The picture could not be read."))
    reader.readAsDataURL(file)
  })

/**
 * The studio's icon control (issue 48 item 4, docs/marketplace.md "Icons"): the expert's icon as the owner sees it,
 * a picture to upload (PNG, JPEG or WebP, at most 256 KB: the server reads the type from the bytes), and Remove to go
 * back to the one drawn from the name. Its own component so the studio editor only places it.
 */
export const StudioIcon = ({ identifier }: { identifier: string }) => {
  // The owner's view is not cached; a counter in the URL shows a new upload at once.
  const [version, setVersion] = useState(0)
  const [status, setStatus] = useState<string | null>(null)
  const [error, setError] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)

  const act = async (work: () => Promise<string>) => {
    setBusy(true)
    setError(null)
    setStatus(null)
    try {
      setStatus(await work())
      setVersion((v) => v + 1)
    } catch (e) {
      setError((e as Error).message)
    } finally {
      setBusy(false)
    }
  }

  const upload = (e: ChangeEvent<HTMLInputElement>) => {
    const file = e.target.files?.[0]
    e.target.value = ""
    if (!file) return
    if (file.size > MAX_BYTES) {
      setError(`The picture is ${Math.ceil(file.size / 1024).toLocaleString()} KB; an icon may be at most 256 KB.`)
      return
    }
    void act(async () => {
      const image = await base64Of(file)
      await call((c) => c.agentIcons.put({ path: { identifier }, payload: { image } }))
      return "The new icon is saved. The marketplace shows it once the expert is published."
    })
  }

  const remove = () =>
    act(async () => {
      await call((c) => c.agentIcons.delete({ path: { identifier } }))
      return "The uploaded icon is removed: the expert shows the one drawn from its name."
    })

  return (
    <fieldset className="card stack" data-testid="studio-icon">
      <legend id="section-icon">Icon</legend>
      <div className="studio-icon">
        <img src={`/v1/agents/${encodeURIComponent(identifier)}/icon?n=${version}`} alt="The expert's icon" width={72} height={72} className="expert-icon" />
        <label>
          Upload a picture (PNG, JPEG or WebP, at most 256 KB)
          <input type="file" accept="image/png,image/jpeg,image/webp" disabled={busy} onChange={upload} />
        </label>
        <button type="button" className="secondary" disabled={busy} onClick={remove}>Remove the icon</button>
      </div>
      <p className="muted small">Without a picture, the icon shows the name's initials.</p>
      <p role="status" aria-live="polite">{status}</p>
      {error && <p role="alert" className="error">{error}</p>}
    </fieldset>
  )
}
