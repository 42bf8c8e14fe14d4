import { createContext, useContext, useEffect, useState, type ReactNode, type MouseEvent } from "react"

/** A small router over the History API: the server answers every app page with the same index.html. */
export interface Location {
  readonly path: string
  readonly search: URLSearchParams
}

const read = (): Location => ({ path: window.location.pathname, search: new URLSearchParams(window.location.search) })
const listeners = new Set<() => void>()

export const navigate = (to: string, replace = false) => {
  if (replace) history.replaceState(null, "", to)
  else history.pushState(null, "", to)
  for (const listener of listeners) listener()
  window.scrollTo(0, 0)
}

const LocationContext = createContext<Location>(read())

export const LocationProvider = ({ children }: { children: ReactNode }) => {
  const [location, setLocation] = useState(read)
  useEffect(() => {
    const update = () => setLocation(read())
    listeners.add(update)
    window.addEventListener("popstate", update)
    return () => {
      listeners.delete(update)
      window.removeEventListener("popstate", update)
    }
  }, [])
  return <LocationContext.Provider value={location}>{children}</LocationContext.Provider>
}

export const useLocation = () => useContext(LocationContext)

export const Link = ({ to, children, className, ...rest }: { to: string; children: ReactNode; className?: string; "aria-current"?: "page" | undefined }) => (
  <a
    href={to}
    className={className}
    {...rest}
    onClick={(e: MouseEvent<HTMLAnchorElement>) => {
      if (e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return
      e.preventDefault()
      navigate(to)
    }}
  >
    {children}
  </a>
)

/** Matches `/chat/:identifier`-style patterns; the params, or none. */
export const match = (pattern: string, path: string): Record<string, string> | undefined => {
  const a = pattern.split("/").filter(Boolean)
  const b = path.replace(/\/+$/, "").split("/").filter(Boolean)
  if (a.length !== b.length) return undefined
  const params: Record<string, string> = {}
  for (let i = 0; i < a.length; i++) {
    if (a[i]!.startsWith(":")) params[a[i]!.slice(1)] = decodeURIComponent(b[i]!)
    else if (a[i] !== b[i]) return undefined
  }
  return params
}
