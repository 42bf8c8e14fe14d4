import { createContext, useCallback, useContext, useEffect, useRef, useState, type ReactNode } from "react"
import { call, ShownError, UNAUTHORIZED } from "./api.js"

/** Who is logged in, as far as the browser can tell: the `token` cookie is HttpOnly, so the wallet answers it. */
export interface Me {
  readonly loggedIn: boolean
  readonly checked: boolean
  readonly phone: string | null
  readonly balance: number | null
  /**
   * This tab was logged in and a request was then refused as not logged in: the account logged in on another
   * device or browser (one login at a time, spec 5.2), or the login expired. The page stays as it was and says so.
   */
  readonly ended: boolean
  /** Another tab of this browser logged in as another phone, so this tab's requests now act as that account. */
  readonly switchedTo: string | null
  /** Whether this person may use the review console (`may_review` of their profile); null until it is read. */
  readonly mayReview: boolean | null
  readonly refresh: () => Promise<void>
}

const MeContext = createContext<Me>({
  loggedIn: false,
  checked: false,
  phone: null,
  balance: null,
  ended: false,
  switchedTo: null,
  mayReview: null,
  refresh: () => Promise.resolve()
})

/** The key another tab writes when it logs in: tabs share the login cookie, and learn of the new login from it. */
export const LOGIN_KEY = "atrium.login"

/** Tells the other tabs of this browser that it logged in (as `phone`). */
export const announceLogin = (phone: string) => {
  localStorage.setItem("atrium.phone", phone)
  localStorage.setItem(LOGIN_KEY, JSON.stringify({ phone, at: Date.now() }))
}

export const MeProvider = ({ children }: { children: ReactNode }) => {
  const [state, setState] = useState({ loggedIn: false, checked: false, balance: null as number | null })
  const [ended, setEnded] = useState(false)
  const [switchedTo, setSwitchedTo] = useState<string | null>(null)
  // The phone this tab acts as, as of its last good answer (another tab may rewrite localStorage meanwhile).
  const mine = useRef(localStorage.getItem("atrium.phone"))
  const refresh = useCallback(() =>
    call((c) => c.wallet.wallet()).then(
      (wallet) => {
        mine.current = localStorage.getItem("atrium.phone")
        setState({ loggedIn: true, checked: true, balance: wallet.balance })
        setEnded(false)
      },
      (failure) =>
        setState((old) => {
          // A tab that was logged in keeps its page and says the login ended, instead of leaving without a word.
          if (old.loggedIn && failure instanceof ShownError && failure.status === 401) {
            setEnded(true)
            return old
          }
          return { loggedIn: false, checked: true, balance: null }
        })
    ), [])
  useEffect(() => void refresh(), [refresh])
  // The profile, once per login (read again when another tab logs in as someone else).
  const [mayReview, setMayReview] = useState<boolean | null>(null)
  useEffect(() => {
    if (!state.loggedIn) return setMayReview(state.checked ? false : null)
    call((c) => c.profile.me()).then((me) => setMayReview(me.may_review), () => setMayReview(false))
  }, [state.loggedIn, state.checked, switchedTo])
  useEffect(() => {
    const refused = () => setState((old) => {
      if (old.loggedIn) setEnded(true)
      return old
    })
    // Another tab logged in: the cookie all tabs share is that login's now. The same person goes on here as if
    // nothing happened; another person's login is said, since this tab now acts as them.
    const stored = (event: StorageEvent) => {
      if (event.key !== LOGIN_KEY || event.newValue === null) return
      const next = (() => {
        try {
          return (JSON.parse(event.newValue) as { phone?: string }).phone ?? null
        } catch {
          return null
        }
      })()
      setSwitchedTo(next !== null && mine.current !== null && next !== mine.current ? next : null)
      void refresh()
    }
    addEventListener(UNAUTHORIZED, refused)
    addEventListener("storage", stored)
    return () => {
      removeEventListener(UNAUTHORIZED, refused)
      removeEventListener("storage", stored)
    }
  }, [refresh])
  return (
    <MeContext.Provider value={{ ...state, phone: localStorage.getItem("atrium.phone"), ended, switchedTo, mayReview, refresh }}>
      {children}
    </MeContext.Provider>
  )
}

export const useMe = () => useContext(MeContext)

export const formatCredits = (n: number | null | undefined) =>
  n === null || n === undefined ? "—" : `${Number(n.toFixed(6)).toLocaleString("en-US", { maximumFractionDigits: 6 })} credits`
