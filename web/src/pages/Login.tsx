import { useEffect, useState, type FormEvent } from "react"
import { solveChallenge } from "altcha-lib"
import { call, failureOf, ShownError } from "../api.js"
import { navigate, useLocation } from "../router.js"
import { announceLogin, useMe } from "../session.js"

declare global {
  interface Window {
    atriumLogin?: { next: string }
  }
}

/** Where to go after logging in: the server checked `next` (a path on this site) when it served /login. */
const nextTarget = (search: URLSearchParams) => {
  const requested = window.atriumLogin?.next ?? search.get("next") ?? "/"
  try {
    const url = new URL(requested, location.origin)
    return url.origin === location.origin ? `${url.pathname}${url.search}${url.hash}` : "/"
  } catch {
    return "/"
  }
}

interface Challenge {
  algorithm: string
  challenge: string
  salt: string
  signature: string
  maxnumber?: number
}

/**
 * The hardening work may ask for a proof of work before a code is sent: solve the altcha challenge here, in the
 * browser, and send its base64 payload with the phone.
 */
const solve = async (): Promise<string> => {
  const response = await fetch("/api/auth/challenge", { credentials: "same-origin" })
  if (!response.ok) throw new ShownError("The security check could not be loaded. Try again.", response.status, "challenge")
  const challenge = await response.json() as Challenge
  const solution = await solveChallenge(challenge.challenge, challenge.salt, challenge.algorithm, challenge.maxnumber).promise
  if (solution === null) throw new ShownError("The security check could not be solved. Try again.", 0, "challenge")
  return btoa(JSON.stringify({ ...challenge, number: solution.number, took: solution.took }))
}

const sendWithChallenge = async (phone: string, challenge: string) => {
  // The challenge field is not in the HttpApi payload of this branch (the client would drop it), so plain fetch.
  const response = await fetch("/api/auth/sms/sendCode", {
    method: "POST",
    credentials: "same-origin",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ phone, challenge })
  })
  if (!response.ok) throw await failureOf(response)
  return await response.json().catch(() => ({})) as { retry_after?: number }
}

const PHONE = /^\+[1-9]\d{6,14}$/

export const LoginPage = () => {
  const { search } = useLocation()
  const me = useMe()
  const [phone, setPhone] = useState(localStorage.getItem("atrium.phone") ?? "")
  const [code, setCode] = useState("")
  const [sent, setSent] = useState(false)
  const [cooldown, setCooldown] = useState(0)
  const [busy, setBusy] = useState(false)
  const [message, setMessage] = useState<string | null>(null)
  const [error, setError] = useState<string | null>(null)

  useEffect(() => {
    if (cooldown <= 0) return
    const timer = setTimeout(() => setCooldown((n) => n - 1), 1000)
    return () => clearTimeout(timer)
  }, [cooldown])

  const sendCode = async (e: FormEvent) => {
    e.preventDefault()
    setError(null)
    if (!PHONE.test(phone)) {
      setError("Phone number is not valid. Write it in international format: + and the country code, for example +8613800000000.")
      return
    }
    setBusy(true)
    try {
      let result: { retry_after?: number }
      try {
        result = await call((c) => c.auth.sendCode({ payload: { phone } }))
      } catch (failure) {
        if (!(failure instanceof ShownError) || failure.type !== "challenge_required") throw failure
        setMessage("Checking that you are a person…")
        result = await sendWithChallenge(phone, await solve())
      }
      setSent(true)
      setCooldown(result.retry_after ?? 60)
      setMessage(`We sent a 6-digit code to ${phone}.`)
    } catch (failure) {
      setMessage(null)
      if (failure instanceof ShownError && failure.status === 429 && failure.type === "rate_limited" && /moments ago/.test(failure.message)) {
        // A code was sent to this phone within the cooldown (from another tab, or before a reload): it is still
        // good, so the code field opens and the countdown says when a new one may be asked for.
        setSent(true)
        setCooldown(failure.retryAfter ?? 60)
        setMessage(`A code was already sent to ${phone} moments ago: enter it below, or ask for a new one when the countdown ends.`)
      } else {
        setError(failure instanceof Error ? failure.message : "The code could not be sent.")
        if (failure instanceof ShownError && failure.status === 429 && failure.retryAfter) setCooldown(failure.retryAfter)
      }
    } finally {
      setBusy(false)
    }
  }

  const logIn = async (e: FormEvent) => {
    e.preventDefault()
    setBusy(true)
    setError(null)
    try {
      try {
        await call((c) => c.auth.login({ payload: { phone, code } }))
      } catch (failure) {
        // Someone has been guessing this phone's code: the server asks for the same check as for sending one.
        if (!(failure instanceof ShownError) || failure.type !== "challenge_required") throw failure
        setMessage("Checking that you are a person…")
        const challenge = await solve()
        await call((c) => c.auth.login({ payload: { phone, code, challenge } }))
      }
      announceLogin(phone)
      await me.refresh()
      const next = nextTarget(search)
      // A page of this app opens in place; anything else (the OAuth consent page) is the server's: load it.
      if (/^\/(chat|studio|marketplace|earnings|wallet|keys)?(\/|$|\?|#)/.test(next)) navigate(next, true)
      else location.assign(next)
    } catch (failure) {
      setError(failure instanceof Error ? failure.message : "Logging in failed.")
    } finally {
      setBusy(false)
    }
  }

  return (
    <section className="narrow">
      <h1>Log in to Atrium</h1>
      <p>We send you a code by SMS. New here? The same steps create your account.</p>
      <form onSubmit={sendCode} className="card stack" aria-label="Send a login code">
        <label>
          Phone number
          <input
            type="tel"
            name="phone"
            autoComplete="tel"
            placeholder="+8613800000000"
            value={phone}
            required
            aria-describedby="phone-hint"
            onChange={(e) => setPhone(e.target.value.trim())}
          />
        </label>
        <small id="phone-hint">In international format, starting with +.</small>
        <button type="submit" disabled={busy || cooldown > 0}>
          {cooldown > 0 ? `Send again in ${cooldown} s` : sent ? "Send a new code" : "Send code"}
        </button>
      </form>
      {sent && (
        <form onSubmit={logIn} className="card stack" aria-label="Enter the code">
          <label>
            Code
            <input
              name="code"
              inputMode="numeric"
              autoComplete="one-time-code"
              maxLength={6}
              value={code}
              required
              autoFocus
              onChange={(e) => setCode(e.target.value.trim())}
            />
          </label>
          <button type="submit" disabled={busy}>Log in</button>
          {cooldown > 0 && <p className="muted small" data-testid="resend-countdown">You can ask for a new code in {cooldown} s.</p>}
        </form>
      )}
      <p role="status" aria-live="polite">{message}</p>
      {error && <p role="alert" className="error">{error}</p>}
    </section>
  )
}
