import { createContext, useCallback, useContext, useEffect, useState, type ReactNode } from "react"
import { call } from "./api.js"

/** Who is logged in, as far as the browser can tell: the `token` cookie is HttpOnly, so the wallet answers it. */
export interface Me {
  readonly loggedIn: boolean
  readonly checked: boolean
  readonly phone: string | null
  readonly balance: number | null
  readonly refresh: () => Promise<void>
}

const MeContext = createContext<Me>({ loggedIn: false, checked: false, phone: null, balance: null, refresh: () => Promise.resolve() })

export const MeProvider = ({ children }: { children: ReactNode }) => {
  const [state, setState] = useState({ loggedIn: false, checked: false, balance: null as number | null })
  const refresh = useCallback(() =>
    call((c) => c.wallet.wallet()).then(
      (wallet) => setState({ loggedIn: true, checked: true, balance: wallet.balance }),
      () => setState({ loggedIn: false, checked: true, balance: null })
    ), [])
  useEffect(() => void refresh(), [refresh])
  return (
    <MeContext.Provider value={{ ...state, phone: localStorage.getItem("atrium.phone"), refresh }}>
      {children}
    </MeContext.Provider>
  )
}

export const useMe = () => useContext(MeContext)

export const formatCredits = (n: number | null | undefined) =>
  n === null || n === undefined ? "—" : `${Number(n.toFixed(6)).toLocaleString("en-US", { maximumFractionDigits: 6 })} credits`
