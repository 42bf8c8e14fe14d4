import { ParseResult, Schema } from "effect"

/**
 * Credits are exact decimals with up to 6 places (DESIGN.md §6), held as integer micro-credits (`bigint` in code,
 * `bigint` in PostgreSQL). A float never stores or adds money; it appears only at the JSON edge, where a number
 * like 0.000001 or 12.5 prints exactly.
 */
export type Micros = bigint

export const MICROS_PER_CREDIT = 1_000_000n

const DECIMAL = /^(\d{1,12})(?:\.(\d{1,6}))?$/

/** Parses a non-negative decimal with at most 6 places ("12", "0.5", "0.000001"); undefined otherwise. */
export const parseCredits = (text: string): Micros | undefined => {
  const match = DECIMAL.exec(text)
  if (match === null) return undefined
  return BigInt(match[1]!) * MICROS_PER_CREDIT + BigInt((match[2] ?? "").padEnd(6, "0"))
}

/** "12.5" for 12_500_000n: the shortest exact decimal. */
export const formatCredits = (micros: Micros): string => {
  const negative = micros < 0n
  const abs = negative ? -micros : micros
  const whole = abs / MICROS_PER_CREDIT
  const fraction = (abs % MICROS_PER_CREDIT).toString().padStart(6, "0").replace(/0+$/, "")
  return `${negative ? "-" : ""}${whole}${fraction.length > 0 ? `.${fraction}` : ""}`
}

/** The JSON number for an amount: exact, because every 6-place decimal below 2^53/10^6 round-trips. */
export const toNumber = (micros: Micros): number => Number(formatCredits(micros))

const amountSchema = (allowZero: boolean) =>
  Schema.Union(Schema.Number, Schema.String).pipe(
    Schema.transformOrFail(Schema.BigIntFromSelf, {
      strict: true,
      decode: (input, _, ast) => {
        const micros = parseCredits(typeof input === "number" ? String(input) : input.trim())
        return micros === undefined || (!allowZero && micros === 0n)
          ? ParseResult.fail(
            new ParseResult.Type(
              ast,
              input,
              `must be a ${allowZero ? "non-negative" : "positive"} amount with at most 6 decimal places`
            )
          )
          : ParseResult.succeed(micros)
      },
      encode: (micros) => ParseResult.succeed(toNumber(micros))
    })
  )

/**
 * A credit amount in a request body: a JSON number or a decimal string, positive, at most 6 decimal places.
 * Numbers are read through their shortest string form, so 0.1 means exactly 0.1.
 */
export const CreditAmount = amountSchema(false)

/** A price or a cap, where 0 is meaningful (a free meter, a cap that blocks everything). */
export const CreditPrice = amountSchema(true)
