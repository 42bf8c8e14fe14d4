import type { ReactNode } from "react"

/** One column of a `ListTable`. */
export interface Column<T> {
  /** The column's heading, and each cell's label where the rows are cards (a phone). */
  readonly label: string
  /** The cell's label on a card when it differs from the heading ("Credits" under "Credits (estimate)"). */
  readonly cardLabel?: string
  /** A heading for screen readers only (a column of buttons). */
  readonly hiddenLabel?: boolean
  /** Figures: aligned right, in tabular digits. */
  readonly numeric?: boolean
  readonly testId?: string
  readonly cell: (row: T) => ReactNode
}

/**
 * A studio list as a table: its first column names the row (the row's header, a link or button to open it), and on a
 * phone each row becomes a card whose cells say their column (`table.cards` in style.css, which needs the
 * `data-label`s). Newest first, read a page at a time: `older` is the button that reads the next page.
 *
 * `rows` is null while the first page is read ("Loading…", unless `failed`: the page shows why). With `empty`, an
 * empty list shows it instead of the table.
 */
export const ListTable = <T,>({ caption, captionHidden = false, testId, rows, rowKey, first, columns, empty, failed = false, older }: {
  readonly caption: string
  readonly captionHidden?: boolean
  readonly testId: string
  readonly rows: ReadonlyArray<T> | null
  readonly rowKey: (row: T) => string
  /** The first column: its heading and the row's header cell. */
  readonly first: { readonly label: string; readonly cell: (row: T) => ReactNode }
  readonly columns: ReadonlyArray<Column<T>>
  readonly empty?: ReactNode
  readonly failed?: boolean
  readonly older?: { readonly label: string; readonly more: boolean; readonly onClick: (last: T) => void }
}) => {
  if (rows === null) return failed ? null : <p role="status">Loading…</p>
  if (rows.length === 0 && empty !== undefined) return <>{empty}</>
  return (
    <>
      <div className="table-wrap">
        <table className="cards" data-testid={testId}>
          <caption className={captionHidden ? "visually-hidden" : undefined}>{caption}</caption>
          <thead>
            <tr>
              <th scope="col">{first.label}</th>
              {columns.map((column) => (
                <th key={column.label} scope="col" className={column.numeric ? "num" : undefined}>
                  {column.hiddenLabel ? <span className="visually-hidden">{column.label}</span> : column.label}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {rows.map((row) => (
              <tr key={rowKey(row)}>
                <th scope="row">{first.cell(row)}</th>
                {columns.map((column) => (
                  <td key={column.label} data-label={column.cardLabel ?? column.label} className={column.numeric ? "num" : undefined} data-testid={column.testId}>
                    {column.cell(row)}
                  </td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {older && <OlderButton rows={rows} {...older} />}
    </>
  )
}

/** "Older runs": reads the page after the last row shown, while the list says there is more. */
export const OlderButton = <T,>({ rows, label, more, onClick }: {
  readonly rows: ReadonlyArray<T> | null
  readonly label: string
  readonly more: boolean
  readonly onClick: (last: T) => void
}) =>
  more && rows !== null && rows.length > 0
    ? <button type="button" className="secondary" onClick={() => onClick(rows[rows.length - 1]!)}>{label}</button>
    : null
