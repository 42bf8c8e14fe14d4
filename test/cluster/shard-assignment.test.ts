import { RunnerAddress } from "@effect/cluster"
import { assert, describe, it } from "@effect/vitest"
import { HashRing } from "effect"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"

/** As `@effect/cluster`'s `Sharding` builds each group's ring: every healthy runner added with its weight. */
const assign = (runners: ReadonlyArray<RunnerAddress.RunnerAddress>, shards: number) => {
  const ring = HashRing.make<RunnerAddress.RunnerAddress>()
  for (const runner of runners) HashRing.add(ring, runner, { weight: 1 })
  return HashRing.getShards(ring, shards)!.map(String)
}

/** Three runners as the fault checker and `WORKERS=3` start them: one host, ports from one range. */
const clusters = Array.from({ length: 40 }, (_, i) =>
  [0, 1, 2].map((j) => RunnerAddress.make("127.0.0.1", 34_000 + i * 17 + j * 3)))

const SHARDS = 300

/**
 * Shard assignment (patches/effect+3.22.4.patch, docs/operations.md "Shard assignment"): a runner that leaves or joins
 * moves only its own shards. Before the patch a leaving runner also moved 5 of the two staying runners' 200 shards on
 * average (16 at worst), and every wallet and session on those waited a hand-over though its owner never stopped: the
 * fault checker's slow bystander charges.
 */
describe("shard assignment", () => {
  it("a runner that leaves moves only its own shards, and one that comes back takes back only its own", () => {
    for (const runners of clusters) {
      const before = assign(runners, SHARDS)
      for (const leaving of runners) {
        const staying = runners.filter((runner) => runner !== leaving)
        const after = assign(staying, SHARDS)
        const movedBetweenStaying = before.filter((owner, shard) => owner !== String(leaving) && after[shard] !== owner)
        assert.deepStrictEqual(movedBetweenStaying, [], `${staying.join(", ")} kept their shards when ${leaving} left`)
        assert.isFalse(after.includes(String(leaving)))
        // It comes back (a paused runner woken, a restarted one): the assignment is the first one again.
        assert.deepStrictEqual(assign([...staying, leaving], SHARDS), before)
      }
    }
  })

  it("every runner computes the same assignment, whatever order it learnt the runners in", () => {
    for (const runners of clusters.slice(0, 5)) {
      assert.deepStrictEqual(assign([...runners].reverse(), SHARDS), assign(runners, SHARDS))
    }
  })

  it("spreads the shards: each of three runners holds a third, within a quarter of it either way", () => {
    for (const runners of clusters) {
      const owners = assign(runners, SHARDS)
      for (const runner of runners) {
        const held = owners.filter((owner) => owner === String(runner)).length
        assert.isAtLeast(held, SHARDS / 3 * 0.75, `${runner} holds ${held}`)
        assert.isAtMost(held, SHARDS / 3 * 1.25, `${runner} holds ${held}`)
      }
    }
  })

  it("the cluster computes its assignment with the patched HashRing.getShards", () => {
    // The patch lives in `effect`; the policy is `@effect/cluster`'s call. A library upgrade that assigns shards
    // another way, or resolves another copy of `effect`, must fail here rather than drop the policy unseen.
    const require = createRequire(import.meta.url)
    const sharding = require.resolve("@effect/cluster/Sharding")
    assert.include(Fs.readFileSync(sharding, "utf8"), "HashRing.getShards(ring, config.shardsPerGroup)")
    const fromCluster = createRequire(sharding).resolve("effect/HashRing")
    assert.strictEqual(Path.relative(Path.dirname(fromCluster), require.resolve("effect/HashRing")), Path.basename(fromCluster))
    assert.include(Fs.readFileSync(fromCluster, "utf8"), "rendezvous")
    // Both builds patched alike, and the CommonJS one still exports the rest of the module.
    const commonJs = require("effect/HashRing") as typeof HashRing
    assert.isFunction(commonJs.get)
    const runners = clusters[0]!
    const ring = commonJs.make<RunnerAddress.RunnerAddress>()
    for (const runner of runners) commonJs.add(ring, runner, { weight: 1 })
    assert.deepStrictEqual(commonJs.getShards(ring, SHARDS)!.map(String), assign(runners, SHARDS))
  })
})
