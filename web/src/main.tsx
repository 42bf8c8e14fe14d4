import { lazy, StrictMode, Suspense, useEffect, useRef, useState } from "react"
import { createRoot } from "react-dom/client"
import "./style.css"
import { Link, LocationProvider, match, navigate, useLocation } from "./router.js"
import { formatCredits, MeProvider, useMe } from "./session.js"

/**
 * Each page is its own chunk (issue 25): the first load fetches the shell and the page it opens on, the rest as
 * they are visited.
 */
const page = <K extends string, M extends Record<K, React.ComponentType<any>>>(load: () => Promise<M>, name: K) =>
  lazy(() => load().then((module) => ({ default: module[name] })))
const LoginPage = page(() => import("./pages/Login.js"), "LoginPage")
const MarketPage = page(() => import("./pages/Market.js"), "MarketPage")
const ExpertPage = page(() => import("./pages/Market.js"), "ExpertPage")
const CreatorPage = page(() => import("./pages/Market.js"), "CreatorPage")
const ChatListPage = page(() => import("./pages/Chat.js"), "ChatListPage")
const ChatPage = page(() => import("./pages/Chat.js"), "ChatPage")
const StudioPage = page(() => import("./pages/Studio.js"), "StudioPage")
const StudioEditPage = page(() => import("./pages/Studio.js"), "StudioEditPage")
const StudioRunsPage = page(() => import("./pages/StudioRuns.js"), "StudioRunsPage")
const StudioSchedulesPage = page(() => import("./pages/StudioSchedules.js"), "StudioSchedulesPage")
const StudioWebhooksPage = page(() => import("./pages/StudioWebhooks.js"), "StudioWebhooksPage")
const StudioTracesPage = page(() => import("./pages/StudioTraces.js"), "StudioTracesPage")
const StudioEvalsPage = page(() => import("./pages/StudioEvals.js"), "StudioEvalsPage")
const EarningsPage = page(() => import("./pages/Earnings.js"), "EarningsPage")
const WalletPage = page(() => import("./pages/Wallet.js"), "WalletPage")
const KeysPage = page(() => import("./pages/Keys.js"), "KeysPage")
const KnowledgePage = page(() => import("./pages/Knowledge.js"), "KnowledgePage")
const CheckoutPage = page(() => import("./pages/Checkout.js"), "CheckoutPage")
const AdminPage = page(() => import("./pages/Admin.js"), "AdminPage")

const NAV = [
  ["/marketplace", "Marketplace"],
  ["/chat", "Chats"],
  ["/studio", "Studio"],
  ["/knowledge", "Knowledge"],
  ["/earnings", "Earnings"],
  ["/wallet", "Wallet"],
  ["/keys", "API keys"]
] as const

/** Pages that need a login send the browser to /login?next=<here>. */
const RequireLogin = ({ children }: { children: React.ReactNode }) => {
  const me = useMe()
  const location = useLocation()
  useEffect(() => {
    if (me.checked && !me.loggedIn) {
      navigate(`/login?next=${encodeURIComponent(location.path + (location.search.size ? `?${location.search}` : ""))}`, true)
    }
  }, [me.checked, me.loggedIn, location])
  if (!me.checked) return <p role="status">Loading…</p>
  return me.loggedIn ? <>{children}</> : null
}

const Routes = () => {
  const { path } = useLocation()
  let params: Record<string, string> | undefined
  if (path === "/" || path === "/marketplace") return <MarketPage />
  if ((params = match("/marketplace/:identifier", path))) return <ExpertPage identifier={params.identifier!} />
  if ((params = match("/creators/:id", path))) return <CreatorPage id={params.id!} />
  if (path === "/login") return <LoginPage />
  if (path === "/chat") return <RequireLogin><ChatListPage /></RequireLogin>
  if ((params = match("/chat/:identifier", path))) return <RequireLogin><ChatPage identifier={params.identifier!} /></RequireLogin>
  if (path === "/studio") return <RequireLogin><StudioPage /></RequireLogin>
  if ((params = match("/studio/:identifier", path))) return <RequireLogin><StudioEditPage identifier={params.identifier!} /></RequireLogin>
  if ((params = match("/studio/:identifier/runs", path))) return <RequireLogin><StudioRunsPage identifier={params.identifier!} /></RequireLogin>
  if ((params = match("/studio/:identifier/schedules", path))) return <RequireLogin><StudioSchedulesPage identifier={params.identifier!} /></RequireLogin>
  if ((params = match("/studio/:identifier/webhooks", path))) return <RequireLogin><StudioWebhooksPage identifier={params.identifier!} /></RequireLogin>
  if ((params = match("/studio/:identifier/traces", path))) return <RequireLogin><StudioTracesPage identifier={params.identifier!} /></RequireLogin>
  if ((params = match("/studio/:identifier/evals", path))) return <RequireLogin><StudioEvalsPage identifier={params.identifier!} /></RequireLogin>
  if (path === "/earnings") return <RequireLogin><EarningsPage /></RequireLogin>
  if (path === "/wallet") return <RequireLogin><WalletPage /></RequireLogin>
  if (path === "/keys") return <RequireLogin><KeysPage /></RequireLogin>
  if (path === "/knowledge") return <RequireLogin><KnowledgePage /></RequireLogin>
  if (path === "/checkout") return <RequireLogin><CheckoutPage /></RequireLogin>
  if (path === "/admin") return <RequireLogin><AdminPage /></RequireLogin>
  return <section><h1>Not found</h1><p>There is no page at {path}.</p></section>
}

/**
 * What a tab says when its login changed under it (docs/web.md, "Logins and tabs"): ended by a login elsewhere
 * (one login at a time), with the way back to this very page; or replaced by another person's login in another tab.
 */
const LoginNotice = () => {
  const me = useMe()
  const location = useLocation()
  const here = location.path + (location.search.size ? `?${location.search}` : "")
  if (me.ended && location.path !== "/login") {
    return (
      <div role="alert" className="card notice login-notice" data-testid="login-ended">
        <p>
          <strong>Your login here has ended.</strong> Your account logged in on another device or browser, and Atrium
          keeps one login at a time (or this login expired). Nothing you did here is lost.
        </p>
        <Link to={`/login?next=${encodeURIComponent(here)}`} className="button">Log in again</Link>
      </div>
    )
  }
  if (me.switchedTo !== null) {
    return (
      <div role="alert" className="card notice login-notice" data-testid="login-switched">
        <p>
          <strong>This browser is now logged in as {me.switchedTo}</strong> (from another tab), so this tab acts as that
          account too. Reload to see its pages.
        </p>
        <button type="button" onClick={() => window.location.reload()}>Reload</button>
      </div>
    )
  }
  return null
}

const Shell = () => {
  const me = useMe()
  const { path } = useLocation()
  const main = useRef<HTMLElement>(null)
  const first = useRef(true)
  // The review console is in the menu of operators only, as the profile says (GET /api/user/me).
  const nav = me.mayReview === true ? [...NAV, ["/admin", "Review"] as const] : NAV
  // On a phone the menu folds behind one button, so the header stays one line; a navigation closes it.
  const [menuOpen, setMenuOpen] = useState(false)
  useEffect(() => setMenuOpen(false), [path])
  // After a navigation in the app, focus goes to the new page's content (a screen reader reads it, and Tab goes on
  // from there); a page load leaves focus at the top, where Tab reaches "Skip to content" first.
  useEffect(() => {
    if (first.current) {
      first.current = false
      return
    }
    main.current?.focus({ preventScroll: true })
  }, [path])
  return (
    <>
      <a className="skip" href="#main">Skip to content</a>
      <header className="top">
        <Link to="/" className="brand">Atrium</Link>
        <button
          type="button"
          className="menu-toggle secondary"
          aria-expanded={menuOpen}
          aria-controls="main-nav"
          onClick={() => setMenuOpen((open) => !open)}
        >
          Menu
        </button>
        <nav aria-label="Main" id="main-nav" className={menuOpen ? "open" : undefined}>
          <ul>
            {nav.map(([to, label]) => (
              <li key={to}>
                <Link to={to} aria-current={path === to || path.startsWith(`${to}/`) ? "page" : undefined}>{label}</Link>
              </li>
            ))}
          </ul>
        </nav>
        <div className="account">
          {me.loggedIn
            ? <Link to="/wallet" className="balance"><span className="visually-hidden">Balance: </span><span data-testid="balance">{formatCredits(me.balance)}</span></Link>
            : me.checked && path !== "/login" && <Link to={`/login?next=${encodeURIComponent(path)}`}>Log in</Link>}
        </div>
      </header>
      <main id="main" ref={main} tabIndex={-1}>
        <LoginNotice />
        <Suspense fallback={<p role="status">Loading…</p>}>
          <Routes />
        </Suspense>
      </main>
    </>
  )
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <LocationProvider>
      <MeProvider>
        <Shell />
      </MeProvider>
    </LocationProvider>
  </StrictMode>
)
