import { useEffect, useState, type FormEvent } from "react"
import type { ApiKeyId } from "../../../src/platform/Ids.js"
import { call, itemsOf } from "../api.js"

interface Key { id: ApiKeyId; name: string; prefix: string; last4: string; created_at: string; last_used_at: string | null }

export const KeysPage = () => {
  const [keys, setKeys] = useState<ReadonlyArray<Key> | null>(null)
  const [name, setName] = useState("")
  const [created, setCreated] = useState<{ name: string; key: string } | null>(null)
  const [error, setError] = useState<string | null>(null)

  const load = () => call((c) => c.account.listApiKeys()).then((r) => setKeys(itemsOf<Key>(r)), (e: Error) => setError(e.message))
  useEffect(() => void load(), [])

  const create = async (e: FormEvent) => {
    e.preventDefault()
    setError(null)
    try {
      const key = await call((c) => c.account.createApiKey({ payload: name ? { name } : {} }))
      setCreated({ name: key.name, key: key.key })
      setName("")
      await load()
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  const revoke = async (key: Key) => {
    if (!confirm(`Revoke the key "${key.name}"? Programs using it stop working at once.`)) return
    try {
      await call((c) => c.account.deleteApiKey({ payload: { id: key.id } }))
      await load()
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  return (
    <section className="stack">
      <h1>API keys</h1>
      <p>Keys let your programs call the platform API (<code>Authorization: Bearer sk_…</code>).</p>
      <form onSubmit={create} className="toolbar" aria-label="Create an API key">
        <label>
          Key name
          <input value={name} maxLength={100} onChange={(e) => setName(e.target.value)} placeholder="default" />
        </label>
        <button type="submit">Create key</button>
      </form>
      {created && (
        <div className="card notice" role="status">
          <p>Your new key <strong>{created.name}</strong>. Copy it now: it is shown only once.</p>
          <p><code data-testid="new-key" className="secret">{created.key}</code></p>
          <button type="button" className="secondary" onClick={() => void navigator.clipboard?.writeText(created.key)}>Copy</button>
        </div>
      )}
      {error && <p role="alert" className="error">{error}</p>}
      {keys !== null && keys.length === 0 && <p>No keys yet.</p>}
      {keys !== null && keys.length > 0 && (
        <div className="table-wrap">
          <table className="cards" role="table">
            <caption className="visually-hidden">Your API keys</caption>
            <thead role="rowgroup"><tr role="row"><th role="columnheader" scope="col">Name</th><th role="columnheader" scope="col">Key</th><th role="columnheader" scope="col">Created</th><th role="columnheader" scope="col">Last used</th><th role="columnheader" scope="col"><span className="visually-hidden">Actions</span></th></tr></thead>
            <tbody role="rowgroup">
              {keys.map((key) => (
                <tr role="row" key={key.id}>
                  <td role="cell" data-label="Name">{key.name}</td>
                  <td role="cell" data-label="Key"><code>{key.prefix}…{key.last4}</code></td>
                  <td role="cell" data-label="Created">{new Date(key.created_at).toLocaleString()}</td>
                  <td role="cell" data-label="Last used">{key.last_used_at ? new Date(key.last_used_at).toLocaleString() : "never"}</td>
                  <td role="cell"><button type="button" className="danger" onClick={() => void revoke(key)} aria-label={`Revoke ${key.name}`}>Revoke</button></td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  )
}
