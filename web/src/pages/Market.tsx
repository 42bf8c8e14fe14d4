import { useEffect, useState, type FormEvent } from "react"
import { CATEGORIES } from "../../../src/agents/Agent.js"
import { call, itemsOf } from "../api.js"
import { Link, navigate, useLocation } from "../router.js"
import { formatCredits, useMe } from "../session.js"

interface Item {
  identifier: string
  name: string
  description: string
  category: string
  billing: { type: string; price: number; free_trial_per_user: number; allow_trial: boolean }
}

interface Card extends Item {
  creator: { display_name: string } | null
  usage?: { conversations: number; people: number }
}

const count = (n: number, one: string, many: string) => `${n.toLocaleString("en-US")} ${n === 1 ? one : many}`

/** How much an expert is used, in words: "12 conversations by 5 people", or "New" before the first. */
export const usageText = (usage: Card["usage"]) =>
  !usage || usage.conversations === 0
    ? "New: no conversations yet"
    : `${count(usage.conversations, "conversation", "conversations")} by ${count(usage.people, "person", "people")}`

export const priceText = (billing: Item["billing"]) =>
  billing.type === "FREE" ? "Free" : `${formatCredits(billing.price)} to unlock`

const PAGE_SIZE = 12

export const MarketPage = () => {
  const { search } = useLocation()
  const keyword = search.get("q") ?? ""
  const category = search.get("category") ?? ""
  const page = Math.max(1, Number(search.get("page") ?? "1") || 1)
  const [draft, setDraft] = useState(keyword)
  const [items, setItems] = useState<ReadonlyArray<Card> | null>(null)
  const [total, setTotal] = useState(0)
  const [error, setError] = useState<string | null>(null)

  useEffect(() => {
    setItems(null)
    setError(null)
    call((c) => c.market.agents({
      urlParams: {
        ...(keyword ? { keyword } : {}),
        ...(category ? { category: category as (typeof CATEGORIES)[number] } : {}),
        page,
        pageSize: PAGE_SIZE
      }
    })).then(
      (result) => {
        setItems(itemsOf<Card>(result))
        setTotal((result as { total?: number }).total ?? 0)
      },
      (e: Error) => setError(e.message)
    )
  }, [keyword, category, page])

  const go = (next: { q?: string; category?: string; page?: number }) => {
    const params = new URLSearchParams()
    const q = next.q ?? keyword
    const c = next.category ?? category
    if (q) params.set("q", q)
    if (c) params.set("category", c)
    if ((next.page ?? 1) > 1) params.set("page", String(next.page))
    navigate(`/marketplace${params.size ? `?${params}` : ""}`)
  }

  const pages = Math.max(1, Math.ceil(total / PAGE_SIZE))
  return (
    <section>
      <h1>Marketplace</h1>
      <form role="search" className="toolbar" onSubmit={(e: FormEvent) => { e.preventDefault(); go({ q: draft }) }}>
        <label>
          Search experts
          <input type="search" name="q" value={draft} onChange={(e) => setDraft(e.target.value)} placeholder="Keyword" />
        </label>
        <label>
          Category
          <select value={category} onChange={(e) => go({ category: e.target.value })}>
            <option value="">All categories</option>
            {CATEGORIES.map((c) => <option key={c} value={c}>{c}</option>)}
          </select>
        </label>
        <button type="submit">Search</button>
      </form>
      {error && <p role="alert" className="error">{error}</p>}
      {items === null && !error && <p role="status">Loading…</p>}
      {items !== null && items.length === 0 && <p>No published expert matches. Try another keyword or category.</p>}
      <ul className="grid" aria-label="Experts">
        {items?.map((item) => (
          <li key={item.identifier} className="card">
            <h2><Link to={`/marketplace/${item.identifier}`}>{item.name}</Link></h2>
            <p className="muted">{item.category} · {priceText(item.billing)}</p>
            <p>{item.description}</p>
            <p className="muted small card-facts">
              <span data-testid="creator">{item.creator ? `By ${item.creator.display_name}` : "By an unverified creator"}</span>
              {" · "}
              <span data-testid="usage">{usageText(item.usage)}</span>
            </p>
          </li>
        ))}
      </ul>
      {pages > 1 && (
        <nav aria-label="Pages" className="pager">
          <button type="button" disabled={page <= 1} onClick={() => go({ page: page - 1 })}>Previous</button>
          <span>Page {page} of {pages}</span>
          <button type="button" disabled={page >= pages} onClick={() => go({ page: page + 1 })}>Next</button>
        </nav>
      )}
    </section>
  )
}

interface Detail extends Item {
  opening_message: string
  case_demos: ReadonlyArray<unknown>
  tools: ReadonlyArray<string>
  version: number
  creator: { display_name: string } | null
}

export const ExpertPage = ({ identifier }: { identifier: string }) => {
  const me = useMe()
  const [expert, setExpert] = useState<Detail | null>(null)
  const [error, setError] = useState<string | null>(null)
  const [status, setStatus] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)
  const [unlocked, setUnlocked] = useState(false)

  useEffect(() => {
    call((c) => c.market.agent({ path: { identifier } })).then((d) => setExpert(d as Detail), (e: Error) => setError(e.message))
  }, [identifier])
  useEffect(() => {
    if (!me.loggedIn) return
    call((c) => c.purchases.status({ path: { agent: identifier } })).then((s) => setUnlocked(s.unlocked), () => undefined)
  }, [identifier, me.loggedIn])

  const unlock = async () => {
    if (!me.loggedIn) return navigate(`/login?next=${encodeURIComponent(`/marketplace/${identifier}`)}`)
    setBusy(true)
    setError(null)
    try {
      const result = await call((c) => c.purchases.purchase({ payload: { agent: identifier } }))
      setStatus(result.charged > 0
        ? `Unlocked for ${formatCredits(result.charged)}. Balance: ${formatCredits(result.balance_remaining)}.`
        : "You had already unlocked this expert: nothing was charged.")
      setUnlocked(true)
      me.refresh()
    } catch (e) {
      setError((e as Error).message)
    } finally {
      setBusy(false)
    }
  }

  if (error && !expert) return <section><h1>Expert</h1><p role="alert" className="error">{error}</p></section>
  if (!expert) return <p role="status">Loading…</p>
  return (
    <article className="stack">
      <p><Link to="/marketplace">← Marketplace</Link></p>
      <h1>{expert.name}</h1>
      <p className="muted">
        {expert.category} · version {expert.version}{expert.creator ? ` · by ${expert.creator.display_name}` : ""}
      </p>
      <p>{expert.description}</p>
      <div className="card">
        <h2>Price</h2>
        <p data-testid="price">{priceText(expert.billing)}</p>
        {expert.billing.type === "UNLOCK" && (
          <p>
            {expert.billing.allow_trial
              ? `${expert.billing.free_trial_per_user} free trial ${expert.billing.free_trial_per_user === 1 ? "message" : "messages"} per person before unlocking.`
              : "No free trial."}
          </p>
        )}
        <div className="row">
          <button type="button" onClick={() => navigate(`/chat/${identifier}`)}>Chat</button>
          {expert.billing.type === "UNLOCK" && unlocked && <p data-testid="unlocked">You have unlocked this expert.</p>}
          {expert.billing.type === "UNLOCK" && !unlocked && (
            <button type="button" className="secondary" disabled={busy} onClick={unlock}>
              Unlock for {formatCredits(expert.billing.price)}
            </button>
          )}
        </div>
        <p role="status" aria-live="polite">{status}</p>
        {error && <p role="alert" className="error">{error}</p>}
      </div>
      {expert.opening_message && (
        <div className="card">
          <h2>Opening message</h2>
          <p className="bubble assistant">{expert.opening_message}</p>
        </div>
      )}
      {expert.case_demos.length > 0 && (
        <div className="card">
          <h2>Examples</h2>
          {expert.case_demos.map((demo, i) => {
            const d = demo as { title?: string; input?: string; output?: string }
            return (
              <figure key={i} className="demo">
                {d.title && <figcaption>{d.title}</figcaption>}
                <p className="bubble user">{d.input}</p>
                <p className="bubble assistant">{d.output}</p>
              </figure>
            )
          })}
        </div>
      )}
      {expert.tools.length > 0 && <p className="muted">Tools: {expert.tools.join(", ")}</p>}
    </article>
  )
}
