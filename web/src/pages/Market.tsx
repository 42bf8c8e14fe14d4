import { useEffect, useState, type FormEvent } from "react"
import { CATEGORIES } from "../../../src/agents/Agent.js"
import { call, itemsOf } from "../api.js"
import { Link, navigate, useLocation } from "../router.js"
import { formatCredits, useMe } from "../session.js"
import { UserId } from "../../../src/platform/Ids.js"

interface Item {
  identifier: string
  name: string
  description: string
  category: string
  billing: { type: string; price: number; free_trial_per_user: number; allow_trial: boolean }
}

interface Rating {
  average: number | null
  count: number
}

interface Card extends Item {
  creator: { id: string; display_name: string } | null
  usage?: { conversations: number; people: number; recent_people?: number }
  rating?: Rating
  icon_url?: string
  featured?: boolean
}

type Sort = "new" | "popular" | "rating" | "price"

const SORTS: ReadonlyArray<readonly [Sort, string]> = [
  ["new", "Newest"],
  ["popular", "Most popular"],
  ["rating", "Best rated"],
  ["price", "Lowest price"]
]

/** A category as a person reads it: "Productivity", not "productivity". */
export const categoryName = (id: string) => id.charAt(0).toLocaleUpperCase() + id.slice(1)

const count = (n: number, one: string, many: string) => `${n.toLocaleString()} ${n === 1 ? one : many}`

/** How much an expert is used, in words: "12 conversations by 5 people", or "New" before the first. */
export const usageText = (usage: Card["usage"]) =>
  !usage || usage.conversations === 0
    ? "New: no conversations yet"
    : `${count(usage.conversations, "conversation", "conversations")} by ${count(usage.people, "person", "people")}`

export const priceText = (billing: Item["billing"]) =>
  billing.type === "FREE" ? "Free" : `${formatCredits(billing.price)} to unlock`

/** The rating in words ("4.5 out of 5 from 2 reviews", "No reviews yet"), the number in the reader's locale. */
export const ratingText = (rating: Rating | undefined) =>
  !rating || rating.count === 0 || rating.average === null
    ? "No reviews yet"
    : `${rating.average.toLocaleString(undefined, { maximumFractionDigits: 1 })} out of 5 from ${count(rating.count, "review", "reviews")}`

/** Five stars, filled to the rounded rating; decoration only (the words say it). */
const Stars = ({ value }: { value: number }) => {
  const full = Math.round(value)
  return <span className="stars" aria-hidden="true">{"★".repeat(full)}{"☆".repeat(5 - full)}</span>
}

export const RatingLine = ({ rating }: { rating: Rating | undefined }) => (
  <span className="rating" data-testid="rating">
    {rating && rating.average !== null && rating.count > 0 && <Stars value={rating.average} />} {ratingText(rating)}
  </span>
)

/** The expert's icon: decorative beside its name, which says who it is. */
export const ExpertIcon = ({ url, size = 48 }: { url: string | undefined; size?: number }) =>
  url ? <img className="expert-icon" src={url} alt="" width={size} height={size} loading="lazy" /> : null

const ExpertCard = ({ item, heading = "h3" }: { item: Card; heading?: "h2" | "h3" }) => {
  const Heading = heading
  return (
    <li className="card expert-card" data-testid="expert-card">
      <div className="expert-head">
        <ExpertIcon url={item.icon_url} />
        <Heading><Link to={`/marketplace/${item.identifier}`}>{item.name}</Link></Heading>
      </div>
      <p className="muted">{categoryName(item.category)} · {priceText(item.billing)}{item.featured ? " · Featured" : ""}</p>
      <p>{item.description}</p>
      <p className="small"><RatingLine rating={item.rating} /></p>
      <p className="muted small card-facts">
        <span data-testid="creator">
          {item.creator
            ? <>By <Link to={`/creators/${item.creator.id}`}>{item.creator.display_name}</Link></>
            : "By an unverified creator"}
        </span>
        {" · "}
        <span data-testid="usage">{usageText(item.usage)}</span>
      </p>
    </li>
  )
}

const PAGE_SIZE = 12

interface Front {
  featured: ReadonlyArray<Card>
  sections: ReadonlyArray<{ category: string; total: number; data: ReadonlyArray<Card> }>
}

/** The front page: Featured, then a section per category with "See all" into the filtered list. */
const FrontSections = () => {
  const [front, setFront] = useState<Front | null>(null)
  const [error, setError] = useState<string | null>(null)
  useEffect(() => {
    call((c) => c.market.front()).then((f) => setFront(f as unknown as Front), (e: Error) => setError(e.message))
  }, [])
  if (error) return <p role="alert" className="error">{error}</p>
  if (!front) return <p role="status">Loading…</p>
  if (front.featured.length === 0 && front.sections.length === 0) {
    return <p>No expert is published yet. Make one in the Studio and submit it for review.</p>
  }
  return (
    <>
      {front.featured.length > 0 && (
        <section aria-labelledby="featured" data-testid="featured">
          <h2 id="featured">Featured</h2>
          <ul className="grid" aria-label="Featured experts">
            {front.featured.map((item) => <ExpertCard key={item.identifier} item={item} />)}
          </ul>
        </section>
      )}
      {front.sections.map((section) => (
        <section key={section.category} aria-labelledby={`section-${section.category}`} data-testid={`section-${section.category}`}>
          <div className="section-head">
            <h2 id={`section-${section.category}`}>{categoryName(section.category)}</h2>
            <Link to={`/marketplace?category=${section.category}&sort=popular`}>
              See all {count(section.total, "expert", "experts")} in {categoryName(section.category)}
            </Link>
          </div>
          <ul className="grid" aria-label={`${categoryName(section.category)} experts`}>
            {section.data.map((item) => <ExpertCard key={item.identifier} item={item} />)}
          </ul>
        </section>
      ))}
    </>
  )
}

export const MarketPage = () => {
  const { search } = useLocation()
  const keyword = search.get("q") ?? ""
  const category = search.get("category") ?? ""
  const sortParam = search.get("sort") ?? ""
  const sort: Sort = SORTS.some(([s]) => s === sortParam) ? sortParam as Sort : "new"
  const page = Math.max(1, Number(search.get("page") ?? "1") || 1)
  const browsing = keyword !== "" || category !== "" || sortParam !== "" || page > 1
  const [draft, setDraft] = useState(keyword)
  const [items, setItems] = useState<ReadonlyArray<Card> | null>(null)
  const [total, setTotal] = useState(0)
  const [error, setError] = useState<string | null>(null)

  useEffect(() => {
    if (!browsing) return
    setItems(null)
    setError(null)
    call((c) => c.market.agents({
      urlParams: {
        ...(keyword ? { keyword } : {}),
        ...(category ? { category: category as (typeof CATEGORIES)[number] } : {}),
        sort,
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
  }, [keyword, category, sort, page, browsing])

  const go = (next: { q?: string; category?: string; sort?: Sort; page?: number }) => {
    const params = new URLSearchParams()
    const q = next.q ?? keyword
    const c = next.category ?? category
    const s = next.sort ?? (sortParam ? sort : "")
    if (q) params.set("q", q)
    if (c) params.set("category", c)
    if (s) params.set("sort", s)
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
            {CATEGORIES.map((c) => <option key={c} value={c}>{categoryName(c)}</option>)}
          </select>
        </label>
        <label>
          Sort by
          <select value={sort} onChange={(e) => go({ sort: e.target.value as Sort })} data-testid="sort">
            {SORTS.map(([value, label]) => <option key={value} value={value}>{label}</option>)}
          </select>
        </label>
        <button type="submit">Search</button>
        {browsing && <Link to="/marketplace">Front page</Link>}
      </form>
      {!browsing && <FrontSections />}
      {browsing && (
        <>
          {error && <p role="alert" className="error">{error}</p>}
          {items === null && !error && <p role="status">Loading…</p>}
          {items !== null && items.length === 0 && <p>No published expert matches. Try another keyword or category.</p>}
          <ul className="grid" aria-label="Experts">
            {items?.map((item) => <ExpertCard key={item.identifier} item={item} heading="h2" />)}
          </ul>
          {pages > 1 && (
            <nav aria-label="Pages" className="pager">
              <button type="button" disabled={page <= 1} onClick={() => go({ page: page - 1 })}>Previous</button>
              <span>Page {page.toLocaleString()} of {pages.toLocaleString()}</span>
              <button type="button" disabled={page >= pages} onClick={() => go({ page: page + 1 })}>Next</button>
            </nav>
          )}
        </>
      )}
    </section>
  )
}

interface Detail extends Item {
  opening_message: string
  case_demos: ReadonlyArray<unknown>
  tools: ReadonlyArray<string>
  version: number
  creator: { id: string; display_name: string } | null
  rating: Rating
  icon_url: string
  featured: boolean
}

interface Review {
  id: string
  rating: number
  text: string
  created_at: string
  updated_at: string
}

const dateText = (iso: string) => new Date(iso).toLocaleDateString(undefined, { dateStyle: "medium" })

/**
 * The reviews of an expert (newest first, "More reviews" for the next page) and, for someone who used it, a form to
 * write, change or delete theirs; anyone else reads why there is no form.
 */
const Reviews = ({ identifier, onChange }: { identifier: string; onChange: () => void }) => {
  const me = useMe()
  const [reviews, setReviews] = useState<ReadonlyArray<Review>>([])
  const [hasMore, setHasMore] = useState(false)
  const [mine, setMine] = useState<{ may_review: boolean; reason: string | null; review: Review | null } | null>(null)
  const [rating, setRating] = useState(0)
  const [text, setText] = useState("")
  const [status, setStatus] = useState<string | null>(null)
  const [error, setError] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)

  const loadReviews = async (after?: string) => {
    const page = await call((c) => c.market.reviews({ path: { identifier }, urlParams: { limit: 10, ...(after ? { after } : {}) } }))
    setReviews((before) => (after ? [...before, ...page.data] : page.data))
    setHasMore(page.has_more)
  }
  const loadMine = async () => {
    const state = await call((c) => c.marketReviews.mine({ path: { identifier } }))
    setMine(state)
    setRating(state.review?.rating ?? 0)
    setText(state.review?.text ?? "")
  }
  useEffect(() => {
    loadReviews().catch((e: Error) => setError(e.message))
  }, [identifier])
  useEffect(() => {
    if (me.loggedIn) loadMine().catch(() => undefined)
  }, [identifier, me.loggedIn])

  const save = async (e: FormEvent) => {
    e.preventDefault()
    if (rating < 1) return setError("Choose a rating from 1 to 5 stars.")
    setBusy(true)
    setError(null)
    try {
      await call((c) => c.marketReviews.put({ path: { identifier }, payload: { rating, ...(text.trim() ? { text } : {}) } }))
      setStatus(mine?.review ? "Your review is updated." : "Thank you: your review is published.")
      await Promise.all([loadMine(), loadReviews()])
      onChange()
    } catch (err) {
      setError((err as Error).message)
    } finally {
      setBusy(false)
    }
  }
  const remove = async () => {
    setBusy(true)
    setError(null)
    try {
      await call((c) => c.marketReviews.delete({ path: { identifier } }))
      setStatus("Your review is deleted.")
      await Promise.all([loadMine(), loadReviews()])
      onChange()
    } catch (err) {
      setError((err as Error).message)
    } finally {
      setBusy(false)
    }
  }

  return (
    <section className="card stack" aria-labelledby="reviews">
      <h2 id="reviews">Reviews</h2>
      {mine?.may_review && (
        <form onSubmit={save} className="stack" aria-label="Your review" data-testid="review-form">
          <fieldset className="star-input">
            <legend>{mine.review ? "Your rating" : "Rate this expert"}</legend>
            {[1, 2, 3, 4, 5].map((n) => (
              <label key={n}>
                <input type="radio" name="rating" value={n} checked={rating === n} onChange={() => setRating(n)} />
                {n === 1 ? "1 star" : `${n} stars`}
              </label>
            ))}
          </fieldset>
          <label>
            Your review (optional)
            <textarea rows={3} maxLength={2000} value={text} onChange={(e) => setText(e.target.value)} />
          </label>
          <div className="row">
            <button type="submit" disabled={busy}>{mine.review ? "Update review" : "Publish review"}</button>
            {mine.review && <button type="button" className="secondary" disabled={busy} onClick={remove}>Delete my review</button>}
          </div>
        </form>
      )}
      {mine && !mine.may_review && mine.reason && <p className="muted">{mine.reason}</p>}
      {!me.loggedIn && me.checked && <p className="muted">Log in and use this expert to review it.</p>}
      <p role="status" aria-live="polite">{status}</p>
      {error && <p role="alert" className="error">{error}</p>}
      {reviews.length === 0 && <p>No reviews yet.</p>}
      <ul className="list" aria-label="Reviews">
        {reviews.map((review) => (
          <li key={review.id} className="review">
            <p>
              <span className="stars" aria-hidden="true">{"★".repeat(review.rating)}{"☆".repeat(5 - review.rating)}</span>{" "}
              <strong>{review.rating === 1 ? "1 star" : `${review.rating} stars`}</strong>
              <span className="muted small"> · {dateText(review.created_at)}{review.updated_at !== review.created_at ? " (edited)" : ""}</span>
            </p>
            {review.text && <p>{review.text}</p>}
          </li>
        ))}
      </ul>
      {hasMore && (
        <button type="button" className="secondary" onClick={() => loadReviews(reviews.at(-1)?.id).catch((e: Error) => setError(e.message))}>
          More reviews
        </button>
      )}
    </section>
  )
}

export const ExpertPage = ({ identifier }: { identifier: string }) => {
  const me = useMe()
  const [expert, setExpert] = useState<Detail | null>(null)
  const [error, setError] = useState<string | null>(null)
  const [status, setStatus] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)
  const [unlocked, setUnlocked] = useState(false)

  const load = () =>
    call((c) => c.market.agent({ path: { identifier } })).then((d) => setExpert(d as unknown as Detail), (e: Error) => setError(e.message))
  useEffect(() => {
    load()
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
      <div className="expert-head">
        <ExpertIcon url={expert.icon_url} size={72} />
        <h1>{expert.name}</h1>
      </div>
      <p className="muted">
        {categoryName(expert.category)} · version {expert.version.toLocaleString()}
        {expert.creator && <> · by <Link to={`/creators/${expert.creator.id}`}>{expert.creator.display_name}</Link></>}
        {expert.featured ? " · Featured" : ""}
      </p>
      <p><RatingLine rating={expert.rating} /></p>
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
      <Reviews identifier={identifier} onChange={load} />
    </article>
  )
}

interface Creator {
  id: string
  display_name: string
  bio: string | null
  experts: ReadonlyArray<Card>
}

/** A creator's public page: their name, bio and published experts. */
export const CreatorPage = ({ id }: { id: string }) => {
  const [creator, setCreator] = useState<Creator | null>(null)
  const [error, setError] = useState<string | null>(null)
  useEffect(() => {
    call((c) => c.market.creator({ path: { id: UserId.unchecked.make(id) } })).then((d) => setCreator(d as unknown as Creator), (e: Error) => setError(e.message))
  }, [id])
  if (error) return <section><h1>Creator</h1><p role="alert" className="error">{error}</p></section>
  if (!creator) return <p role="status">Loading…</p>
  return (
    <section className="stack">
      <p><Link to="/marketplace">← Marketplace</Link></p>
      <h1>{creator.display_name}</h1>
      {creator.bio && <p>{creator.bio}</p>}
      <h2>{creator.experts.length === 0 ? "No published experts yet" : `Experts by ${creator.display_name}`}</h2>
      <ul className="grid" aria-label={`Experts by ${creator.display_name}`}>
        {creator.experts.map((item) => <ExpertCard key={item.identifier} item={item} />)}
      </ul>
    </section>
  )
}
