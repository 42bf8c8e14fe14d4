import { Either } from "effect"

/**
 * RFC 4180 records: fields split on commas, quoted fields with `""` for a quote and commas and line breaks inside,
 * CRLF or LF line ends, a leading byte-order mark dropped. Every record is kept, blank ones included (the caller
 * decides what a blank line means); a quote left open is a `Left`. Shared by knowledge files (src/knowledge) and
 * eval rows (src/evals).
 */
export const csvRecords = (text: string): Either.Either<Array<Array<string>>, "unclosed_quote"> => {
  const records: Array<Array<string>> = []
  let record: Array<string> = []
  let field = ""
  let quoted = false
  let i = 0
  const body = text.replace(/^\uFEFF/, "")
  while (i < body.length) {
    const c = body[i]!
    if (quoted) {
      if (c === "\"") {
        if (body[i + 1] === "\"") {
          field += "\""
          i += 2
          continue
        }
        quoted = false
      } else field += c
      i++
      continue
    }
    if (c === "\"" && field === "") quoted = true
    else if (c === ",") {
      record.push(field)
      field = ""
    } else if (c === "\n" || c === "\r") {
      if (c === "\r" && body[i + 1] === "\n") i++
      record.push(field)
      records.push(record)
      record = []
      field = ""
    } else field += c
    i++
  }
  if (quoted) return Either.left("unclosed_quote")
  if (field !== "" || record.length > 0) {
    record.push(field)
    records.push(record)
  }
  return Either.right(records)
}
