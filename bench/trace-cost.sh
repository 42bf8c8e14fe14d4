#!/usr/bin/env bash
# What traces cost a run (issue 46: "the run's cost per request may rise by at most 10%"): bench/runs.ts at 50
# clients (builtin model, short answers) on one copy of the compiled build, alternately with the span processor
# (`TraceWriterLive`, as shipped) and without it (no `TraceSink`: a run makes no GenAI spans of its own), for
# ROUNDS rounds. Server CPU per completed run, and the ratio with/without in each round, then their medians.
#
#   npm run build && DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379 \
#     bash bench/trace-cost.sh [ROUNDS=5]
#
# The switch is not in the sources: the copy's `dist/traces/Writer.js` gets a one-line edit that reads
# BENCH_TRACES=off, so both variants run the same bytes but for that line. A script, not a test.
set -euo pipefail
rounds=${1:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d)
trap '[ "${KEEP:-0}" = 1 ] || rm -rf "$scratch"' EXIT

# The bench scripts import the test support and the sources (types, the local services).
mkdir "$scratch/bench" && cp "$root"/bench/*.ts "$scratch/bench/" && cp -rp "$root/test" "$root/src" "$root/dist" "$scratch/"
cp "$root"/package.json "$root"/tsconfig*.json "$scratch/" && ln -s "$root/node_modules" "$scratch/node_modules"
writer="$scratch/dist/traces/Writer.js"
sed -i 's/^export const TraceWriterLive = Layer.scoped(/export const TraceWriterLive = process.env.BENCH_TRACES === "off" ? Layer.empty : Layer.scoped(/' "$writer"
grep -q BENCH_TRACES "$writer" || { echo "trace-cost: could not place the switch in $writer" >&2; exit 2; }
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
cd "$scratch"
for r in $(seq 1 "$rounds"); do
  # Alternate which goes first, so neither always runs on the warmer machine.
  order="on off"; [ $((r % 2)) -eq 0 ] && order="off on"
  for v in $order; do
    BENCH_TRACES=$v npx tsx bench/runs.ts --levels 50 --seconds 10 --event-concurrency 1 --event-words 3 \
      --json "$scratch/$v-$r.json" > "$scratch/$v-$r.md" 2> "$scratch/$v-$r.err"
    echo "round $r traces $v: $(grep '50 concurrent' "$scratch/$v-$r.md")" >&2
  done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
node -e '
const fs = require("node:fs")
const [dir, rounds] = [process.argv[1], Number(process.argv[2])]
const cpuPerRun = (file) => {
  const row = fs.readFileSync(file, "utf8").split("\n").find((l) => l.includes("50 concurrent")).split("|").map((c) => c.trim())
  return Number(row[8]) / Number(row[2]) * 1000 // server CPU (cores) over runs per second
}
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] }
const on = [], off = [], ratio = []
console.log("| round | with traces, ms CPU/run | without, ms CPU/run | with / without |\n| ---: | ---: | ---: | ---: |")
for (let r = 1; r <= rounds; r++) {
  const a = cpuPerRun(`${dir}/on-${r}.md`), b = cpuPerRun(`${dir}/off-${r}.md`)
  on.push(a); off.push(b); ratio.push(a / b)
  console.log(`| ${r} | ${a.toFixed(3)} | ${b.toFixed(3)} | ${(a / b).toFixed(3)} |`)
}
console.log(`| median | ${median(on).toFixed(3)} | ${median(off).toFixed(3)} | ${median(ratio).toFixed(3)} |`)
' "$scratch" "$rounds"
