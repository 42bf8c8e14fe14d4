/**
 * Compares two V8 heap snapshots of one process (`bench/sessions.ts --heap-snapshots DIR` writes `warm` and `last`):
 * what the heap gained between them, by constructor, per unit (per session, given `--per N`).
 *
 *   node --max-old-space-size=8000 --import tsx bench/heapdiff.ts DIR/warm.heapsnapshot DIR/last.heapsnapshot --per 2000
 *
 * Flags: --per N (divide by N: the sessions added between the two), --top 40 (rows per table), --chains CLASS (for
 * the new objects of CLASS, their dominator chains up to the first object that existed before, counted), --retainers
 * KIND (for the new objects of KIND: what refers to them, by the referrer's kind and the edge's name, with their size).
 *
 * Tables (each a Markdown table):
 * 1. By kind (`type:name`: an object's constructor, a closure's function name, `(string)`, `(code)`...): count and
 *    self size of the first and the second, and the difference per unit; with the retained size of the second's
 *    objects of that kind that no other object of the same kind dominates (so a kind is not counted twice).
 * 2. Where the new objects hang: each new object that the dominator tree puts right under an old one (a "new root"),
 *    grouped by (old dominator's kind → new root's kind), with their retained size per unit: what keeps the growth.
 *
 * Node ids are stable within one process, so "new" means: an id the first snapshot does not have. A script, not a
 * test (like the benches): it asserts nothing.
 */
import * as Fs from "node:fs"

const argv = process.argv.slice(2)
const files = argv.filter((a, i) => !a.startsWith("--") && (i === 0 || !argv[i - 1]!.startsWith("--")))
const flag = (name: string) => {
  const i = argv.indexOf(`--${name}`)
  return i >= 0 ? argv[i + 1] : undefined
}
const PER = Number(flag("per") ?? 1)
const TOP = Number(flag("top") ?? 40)
const CHAINS = flag("chains")
const RETAINERS = flag("retainers")

interface Snapshot {
  readonly count: number
  readonly type: Uint8Array
  readonly name: Uint32Array
  readonly id: Float64Array
  readonly self: Float64Array
  readonly firstEdge: Uint32Array
  readonly edgeType: Uint8Array
  readonly edgeTo: Uint32Array
  readonly edgeName: Uint32Array
  /** A closure's line (1-based) where the snapshot gives it. */
  readonly line: Map<number, number>
  readonly strings: ReadonlyArray<string>
  readonly nodeTypes: ReadonlyArray<string>
  readonly edgeTypes: ReadonlyArray<string>
}

const load = (file: string): Snapshot => {
  const raw = JSON.parse(Fs.readFileSync(file, "utf8"))
  const meta = raw.snapshot.meta
  const nf: Array<string> = meta.node_fields
  const ef: Array<string> = meta.edge_fields
  const nodes: Array<number> = raw.nodes
  const edges: Array<number> = raw.edges
  const N = nf.length
  const E = ef.length
  const count = nodes.length / N
  const [ti, ni, ii, si, eci] = ["type", "name", "id", "self_size", "edge_count"].map((f) => nf.indexOf(f))
  const [eti, eni, enm] = ["type", "to_node", "name_or_index"].map((f) => ef.indexOf(f))
  const type = new Uint8Array(count)
  const name = new Uint32Array(count)
  const id = new Float64Array(count)
  const self = new Float64Array(count)
  const firstEdge = new Uint32Array(count + 1)
  let edge = 0
  for (let n = 0; n < count; n++) {
    const o = n * N
    type[n] = nodes[o + ti!]!
    name[n] = nodes[o + ni!]!
    id[n] = nodes[o + ii!]!
    self[n] = nodes[o + si!]!
    firstEdge[n] = edge
    edge += nodes[o + eci!]!
  }
  firstEdge[count] = edge
  const edgeType = new Uint8Array(edge)
  const edgeTo = new Uint32Array(edge)
  const edgeName = new Uint32Array(edge)
  for (let e = 0; e < edge; e++) {
    edgeType[e] = edges[e * E + eti!]!
    edgeTo[e] = edges[e * E + eni!]! / N
    edgeName[e] = edges[e * E + enm!]!
  }
  const lf: Array<string> = meta.location_fields ?? []
  const locations: Array<number> = raw.locations ?? []
  const line = new Map<number, number>()
  const [loi, lli] = ["object_index", "line"].map((f) => lf.indexOf(f))
  for (let l = 0; l < locations.length; l += lf.length) line.set(locations[l + loi!]! / N, locations[l + lli!]! + 1)
  return {
    count,
    type,
    name,
    id,
    self,
    firstEdge,
    edgeType,
    edgeTo,
    edgeName,
    line,
    strings: raw.strings,
    nodeTypes: meta.node_types[0],
    edgeTypes: meta.edge_types[0]
  }
}

/** A closure's source: the last two parts of its script's path and its line. */
const whereOf = (s: Snapshot, n: number): string => {
  const edgeTo = (from: number, name: string) => {
    for (let e = s.firstEdge[from]!; e < s.firstEdge[from + 1]!; e++) {
      const type = s.edgeTypes[s.edgeType[e]!]
      if (type !== "element" && type !== "hidden" && s.strings[s.edgeName[e]!] === name) return s.edgeTo[e]!
    }
    return undefined
  }
  const shared = edgeTo(n, "shared")
  const script = shared === undefined ? undefined : edgeTo(shared, "script_or_debug_info")
  const file = script === undefined ? "?" : s.strings[s.name[script]!]!.split("/").slice(-2).join("/")
  return `${file}:${s.line.get(n) ?? "?"}`
}

const kindOf = (s: Snapshot, n: number): string => {
  const type = s.nodeTypes[s.type[n]!]!
  switch (type) {
    case "string":
    case "concatenated string":
    case "sliced string":
    case "number":
    case "code":
    case "bigint":
    case "symbol":
      return `(${type})`
    case "object":
    case "native":
    case "regexp":
      return s.strings[s.name[n]!]!
    case "closure":
      return `${s.strings[s.name[n]!] || "(anonymous)"}() ${whereOf(s, n)}`
    default:
      return `${type}:${s.strings[s.name[n]!]!.slice(0, 60)}`
  }
}

/** Immediate dominators from node 0 (the synthetic root), weak edges ignored (Cooper, Harvey and Kennedy). */
const dominators = (s: Snapshot): { idom: Uint32Array; reachable: Uint8Array } => {
  const weak = s.edgeTypes.indexOf("weak")
  const { count, firstEdge, edgeType, edgeTo } = s
  // Post-order numbering by an iterative depth-first walk.
  const post = new Int32Array(count).fill(-1)
  const order = new Uint32Array(count)
  const visited = new Uint8Array(count)
  const stack = new Uint32Array(count)
  const cursor = new Uint32Array(count)
  let top = 0
  let next = 0
  stack[top++] = 0
  visited[0] = 1
  cursor[0] = firstEdge[0]!
  while (top > 0) {
    const n = stack[top - 1]!
    let pushed = false
    while (cursor[n]! < firstEdge[n + 1]!) {
      const e = cursor[n]!++
      if (edgeType[e] === weak) continue
      const to = edgeTo[e]!
      if (visited[to]) continue
      visited[to] = 1
      cursor[to] = firstEdge[to]!
      stack[top++] = to
      pushed = true
      break
    }
    if (!pushed) {
      top--
      post[n] = next
      order[next++] = n
    }
  }
  // Predecessors (reachable ones only), as a compressed list.
  const predCount = new Uint32Array(count + 1)
  for (let n = 0; n < count; n++) {
    if (!visited[n]) continue
    for (let e = firstEdge[n]!; e < firstEdge[n + 1]!; e++) if (edgeType[e] !== weak) predCount[edgeTo[e]! + 1]!++
  }
  for (let n = 0; n < count; n++) predCount[n + 1]! += predCount[n]!
  const preds = new Uint32Array(predCount[count]!)
  const fill = predCount.slice(0, count)
  for (let n = 0; n < count; n++) {
    if (!visited[n]) continue
    for (let e = firstEdge[n]!; e < firstEdge[n + 1]!; e++) if (edgeType[e] !== weak) preds[fill[edgeTo[e]!]!++] = n
  }
  // idom by post-order number; NONE until known.
  const NONE = 0xffffffff
  const idomPo = new Uint32Array(next).fill(NONE)
  const rootPo = post[0]!
  idomPo[rootPo] = rootPo
  const intersect = (a: number, b: number) => {
    while (a !== b) {
      while (a < b) a = idomPo[a]!
      while (b < a) b = idomPo[b]!
    }
    return a
  }
  for (let changed = true; changed;) {
    changed = false
    for (let po = next - 1; po >= 0; po--) {
      if (po === rootPo) continue
      const n = order[po]!
      let idom = NONE
      for (let p = predCount[n]!; p < predCount[n + 1]!; p++) {
        const pp = post[preds[p]!]!
        if (idomPo[pp] === NONE) continue
        idom = idom === NONE ? pp : intersect(pp, idom)
      }
      if (idom !== NONE && idomPo[po] !== idom) {
        idomPo[po] = idom
        changed = true
      }
    }
  }
  const idom = new Uint32Array(count)
  for (let po = 0; po < next; po++) idom[order[po]!] = order[idomPo[po]!]!
  return { idom, reachable: visited }
}

const retainedOf = (s: Snapshot, idom: Uint32Array, reachable: Uint8Array): Float64Array => {
  // Children before their dominators: by a post-order of the dominator tree, which sorting by depth gives.
  const depth = new Uint32Array(s.count)
  const depthOf = (n: number): number => {
    const path: Array<number> = []
    let d = 0
    while (n !== 0 && depth[n] === 0) {
      path.push(n)
      n = idom[n]!
    }
    d = n === 0 ? 0 : depth[n]!
    for (let i = path.length - 1; i >= 0; i--) depth[path[i]!] = ++d
    return d
  }
  const nodes: Array<number> = []
  for (let n = 1; n < s.count; n++) {
    if (!reachable[n]) continue
    depthOf(n)
    nodes.push(n)
  }
  nodes.sort((a, b) => depth[b]! - depth[a]!)
  const retained = Float64Array.from(s.self)
  for (const n of nodes) retained[idom[n]!] += retained[n]!
  return retained
}

const main = () => {
  if (files.length !== 2) throw new Error("usage: heapdiff.ts BEFORE.heapsnapshot AFTER.heapsnapshot [--per N] [--top 40] [--chains CLASS]")
  const t0 = performance.now()
  const a = load(files[0]!)
  const b = load(files[1]!)
  console.error(`loaded ${a.count} and ${b.count} nodes in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
  const { idom, reachable } = dominators(b)
  const retained = retainedOf(b, idom, reachable)
  console.error(`dominators in ${((performance.now() - t0) / 1000).toFixed(1)} s`)

  const before = new Map<string, { count: number; self: number }>()
  const oldIds = new Set<number>()
  for (let n = 0; n < a.count; n++) {
    oldIds.add(a.id[n]!)
    const k = kindOf(a, n)
    const row = before.get(k) ?? { count: 0, self: 0 }
    row.count++
    row.self += a.self[n]!
    before.set(k, row)
  }
  const after = new Map<string, { count: number; self: number; retained: number }>()
  const kinds: Array<string> = new Array(b.count)
  for (let n = 0; n < b.count; n++) kinds[n] = kindOf(b, n)
  for (let n = 0; n < b.count; n++) {
    const k = kinds[n]!
    const row = after.get(k) ?? { count: 0, self: 0, retained: 0 }
    row.count++
    row.self += b.self[n]!
    // Retained once per kind: not if an object of the same kind dominates this one.
    if (reachable[n]) {
      let up = idom[n]!
      let nested = false
      for (let hops = 0; up !== 0 && hops < 64; hops++, up = idom[up]!) {
        if (kinds[up] === k) {
          nested = true
          break
        }
      }
      if (!nested) row.retained += retained[n]!
    }
    after.set(k, row)
  }
  let totalA = 0
  let totalB = 0
  for (const r of before.values()) totalA += r.self
  for (const r of after.values()) totalB += r.self
  const kib = (bytes: number) => (bytes / 1024).toFixed(2)
  console.log(`${files[0]}: ${a.count} nodes, ${(totalA / 1024 / 1024).toFixed(1)} MiB; ${files[1]}: ${b.count} nodes, ${(totalB / 1024 / 1024).toFixed(1)} MiB`)
  console.log(`difference per unit (÷ ${PER}): ${kib((totalB - totalA) / PER)} KiB self size, ${((b.count - a.count) / PER).toFixed(1)} objects`)
  console.log()
  console.log(`| kind | count +/unit | self +B/unit | self before KiB | self after KiB | retained after (not nested) KiB/unit |`)
  console.log(`| --- | ---: | ---: | ---: | ---: | ---: |`)
  const rows = Array.from(after.entries()).map(([k, r]) => {
    const p = before.get(k) ?? { count: 0, self: 0 }
    return { k, dc: (r.count - p.count) / PER, ds: (r.self - p.self) / PER, a: p.self, b: r.self, ret: r.retained / PER }
  })
  for (const [k, p] of before) if (!after.has(k)) rows.push({ k, dc: -p.count / PER, ds: -p.self / PER, a: p.self, b: 0, ret: 0 })
  rows.sort((x, y) => y.ds - x.ds)
  for (const r of rows.slice(0, TOP)) {
    console.log(`| \`${r.k.replace(/\|/g, "\\|").replace(/\n/g, " ")}\` | ${r.dc.toFixed(2)} | ${r.ds.toFixed(0)} | ${kib(r.a)} | ${kib(r.b)} | ${kib(r.ret)} |`)
  }

  // Where the new objects hang: new objects whose immediate dominator is old.
  const isNew = (n: number) => !oldIds.has(b.id[n]!)
  const hang = new Map<string, { count: number; retained: number }>()
  for (let n = 1; n < b.count; n++) {
    if (!reachable[n] || !isNew(n)) continue
    const d = idom[n]!
    if (isNew(d) && d !== 0) continue
    const k = `${kinds[d]} → ${kinds[n]}`
    const row = hang.get(k) ?? { count: 0, retained: 0 }
    row.count++
    row.retained += retained[n]!
    hang.set(k, row)
  }
  console.log()
  console.log(`| old dominator → new object | count/unit | retained B/unit |`)
  console.log(`| --- | ---: | ---: |`)
  for (const [k, r] of Array.from(hang).sort((x, y) => y[1].retained - x[1].retained).slice(0, TOP)) {
    console.log(`| \`${k.replace(/\|/g, "\\|").replace(/\n/g, " ")}\` | ${(r.count / PER).toFixed(2)} | ${(r.retained / PER).toFixed(0)} |`)
  }

  // Where the new objects are hooked into old ones: edges from an old object to a new one, by the old one's kind,
  // the edge's name and the new one's kind.
  const hooks = new Map<string, number>()
  const weak = b.edgeTypes.indexOf("weak")
  for (let n = 0; n < b.count; n++) {
    if (isNew(n)) continue
    for (let e = b.firstEdge[n]!; e < b.firstEdge[n + 1]!; e++) {
      const to = b.edgeTo[e]!
      if (!isNew(to) || b.edgeType[e] === weak) continue
      const type = b.edgeTypes[b.edgeType[e]!]
      const edgeName = type === "element" || type === "hidden" ? `[${type}]` : b.strings[b.edgeName[e]!]
      const k = `${kinds[n]} .${edgeName} → ${kinds[to]}`
      hooks.set(k, (hooks.get(k) ?? 0) + 1)
    }
  }
  console.log()
  console.log(`| old object .edge → new object | edges/unit |`)
  console.log(`| --- | ---: |`)
  for (const [k, c] of Array.from(hooks).sort((x, y) => y[1] - x[1]).slice(0, TOP)) {
    console.log(`| \`${k.replace(/\|/g, "\\|").replace(/\n/g, " ")}\` | ${(c / PER).toFixed(2)} |`)
  }

  if (RETAINERS !== undefined) {
    const by = new Map<string, { count: number; self: number }>()
    for (let n = 0; n < b.count; n++) {
      for (let e = b.firstEdge[n]!; e < b.firstEdge[n + 1]!; e++) {
        const to = b.edgeTo[e]!
        if (b.edgeType[e] === weak || !isNew(to) || kinds[to] !== RETAINERS) continue
        const type = b.edgeTypes[b.edgeType[e]!]
        const edgeName = type === "element" || type === "hidden" ? `[${type}]` : b.strings[b.edgeName[e]!]
        const k = `${kinds[n]}${isNew(n) ? "" : " (old)"} .${edgeName}`
        const row = by.get(k) ?? { count: 0, self: 0 }
        row.count++
        row.self += b.self[to]!
        by.set(k, row)
      }
    }
    console.log()
    console.log(`What refers to new \`${RETAINERS}\` (an object with several referrers counts under each):`)
    for (const [k, r] of Array.from(by).sort((x, y) => y[1].self - x[1].self).slice(0, TOP)) {
      console.log(`- ${(r.count / PER).toFixed(2)}/unit, ${(r.self / PER).toFixed(0)} B/unit: ${k}`)
    }
  }

  if (CHAINS !== undefined) {
    const chains = new Map<string, number>()
    for (let n = 1; n < b.count; n++) {
      if (!reachable[n] || !isNew(n) || kinds[n] !== CHAINS) continue
      const chain: Array<string> = [kinds[n]!]
      let up = idom[n]!
      for (let hops = 0; hops < 12 && up !== 0; hops++, up = idom[up]!) {
        chain.push(`${kinds[up]}${isNew(up) ? "" : " (old)"}`)
        if (!isNew(up)) break
      }
      const k = chain.join(" ← ")
      chains.set(k, (chains.get(k) ?? 0) + 1)
    }
    console.log()
    console.log(`Dominator chains of new \`${CHAINS}\`:`)
    for (const [k, c] of Array.from(chains).sort((x, y) => y[1] - x[1]).slice(0, TOP)) console.log(`- ${(c / PER).toFixed(2)}/unit: ${k}`)
  }
}

main()
