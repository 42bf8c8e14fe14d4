/**
 * Verified bearer credentials, kept in this process so a repeated bearer is not verified or looked up again (issue 45
 * item 3, docs/http.md "Caches"): a bounded map in least-recently-used order, each entry until its own deadline (the
 * credential's remaining life, or less). Plain data, read without an effect: it is on every authenticated request.
 *
 * Whatever can revoke a credential invalidates its entries here (`delete`, `deleteWhere`); a revocation made by
 * another process reaches this one when the entry's deadline passes, which is why a revocable credential's deadline
 * is short.
 */
export class BearerCache<A> {
  private readonly entries = new Map<string, { readonly value: A; readonly until: number }>()

  constructor(readonly capacity: number) {}

  /** The value cached for `key` if its deadline is still ahead of `now` (milliseconds), as most recently used. */
  get(key: string, now: number): A | undefined {
    const entry = this.entries.get(key)
    if (entry === undefined) return undefined
    this.entries.delete(key)
    if (entry.until <= now) return undefined
    this.entries.set(key, entry)
    return entry.value
  }

  /** Keeps `value` for `key` until `until` (milliseconds); the least recently used entry goes when full. */
  set(key: string, value: A, until: number): void {
    this.entries.delete(key)
    if (this.entries.size >= this.capacity) {
      const oldest = this.entries.keys().next()
      if (oldest.done !== true) this.entries.delete(oldest.value)
    }
    this.entries.set(key, { value, until })
  }

  delete(key: string): void {
    this.entries.delete(key)
  }

  /** Drops every entry whose value `matches` (a revocation that names the owner, not the credential). */
  deleteWhere(matches: (value: A) => boolean): void {
    for (const [key, entry] of this.entries) if (matches(entry.value)) this.entries.delete(key)
  }

  get size(): number {
    return this.entries.size
  }
}
