import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { checkCgroups, groupOf, sweepCgroups } from "../../src/runtime/sandbox/Cgroup.js"
import { checkContainment } from "../../src/runtime/sandbox/Containment.js"
import { madeByLiveServer, serverTag } from "../../src/runtime/sandbox/Guests.js"
import { pollUntil } from "../support/Poll.js"

/**
 * The memory cgroup of each guest (issue 42 item 2), where the host gives one: a root server with a writable memory
 * controller, as CI's machine is. There the cgroup must be in force, and a guest whose buffers stay under
 * `RLIMIT_DATA` but pass the cgroup's bound is killed by the kernel at it. A newcomer's non-root `npm test` has no
 * cgroup to give, and these cases say so rather than pass on nothing.
 */
const cgroups = checkCgroups()
const required = process.env.CI === "true" && process.getuid?.() === 0
const MiB = 1024 * 1024

describe("a guest's memory cgroup", () => {
  it("is available to a root server on a host with a writable memory controller (CI's)", () => {
    if (!required) return
    assert.strictEqual(cgroups._tag, "Available", JSON.stringify(cgroups))
  })

  it.effect.skipIf(cgroups._tag !== "Available")(
    "buffers outside WebAssembly and V8 are killed at the cgroup's bound, under a looser RLIMIT_DATA",
    () =>
      Effect.gen(function*() {
        const check = checkContainment({
          packageIndex: Option.none(),
          uidBase: 200_000,
          uidCount: 1000,
          requireNetworkNamespace: true
        } as Parameters<typeof checkContainment>[0])
        assert.strictEqual(check._tag, "Available", JSON.stringify(check))
        if (check._tag !== "Available" || cgroups._tag !== "Available") return
        assert.include(check.containment.layers, `memory cgroup (${cgroups.cgroups.version})`)
        const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "atrium-cgroup-"))
        Fs.chmodSync(dir, 0o755)
        // 400 MiB of Node buffers, every page touched: outside V8's heap, inside RLIMIT_DATA's 1 GiB.
        const hog = Path.join(dir, "hog.mjs")
        Fs.writeFileSync(
          hog,
          "const held = []\nfor (let i = 0; i < 40; i++) held.push(Buffer.alloc(10 * 1024 * 1024, 1))\n" +
            "process.stdout.write(`survived with ${held.length * 10} MiB`)\n",
          { mode: 0o644 }
        )
        const group = cgroups.cgroups.make(`${serverTag()}-test-${process.pid}`, 128 * MiB)
        try {
          const { file, args } = check.containment.command(64, 1024 * MiB, check.containment.ownUids ? 200_456 : undefined, group)
          const guest = args.at(-1)!
          const output = ChildProcess.spawnSync(
            file,
            args.map((arg) => arg === guest ? hog : arg === `--allow-fs-read=${guest}` ? `--allow-fs-read=${hog}` : arg),
            { env: {}, cwd: dir, encoding: "utf8", timeout: 30_000 }
          )
          assert.notInclude(output.stdout, "survived", "the guest got past its cgroup's bound")
          assert.isTrue(cgroups.cgroups.oomKilled(group), `the kernel's OOM killer ended it (${output.status} ${output.signal} ${output.stderr})`)
          assert.closeTo(cgroups.cgroups.limitOf(group)!, 128 * MiB, 4096)
        } finally {
          // Polled: the kernel lets a group go once its last process has been reaped.
          yield* Effect.ignore(Effect.sandbox(pollUntil(Effect.sync(() => cgroups.cgroups.remove(group)), (removed) => removed, "the group removed", { every: 50, within: 2_000 })))
          Fs.rmSync(dir, { recursive: true, force: true })
        }
        assert.isFalse(Fs.existsSync(group), "the guest's group is removed once it ended")
      }),
    60_000
  )

  it.effect.skipIf(cgroups._tag !== "Available")("a live guest is in a group of its own, seen from /proc", () =>
    Effect.gen(function*() {
      if (cgroups._tag !== "Available") return
      const group = cgroups.cgroups.make(`${serverTag()}-probe-${process.pid}`, 256 * MiB)
      const child = ChildProcess.spawn("/bin/sh", ["-c", 'echo $$ > "$0/cgroup.procs" && exec sleep 5', group], { stdio: "ignore" })
      try {
        // Polled: the shell moves itself into the group in its own time.
        yield* pollUntil(Effect.sync(() => groupOf(cgroups.cgroups, child.pid!)), (seen) => seen === Path.basename(group), "the process in its group", { every: 25, within: 1_000 })
        assert.isFalse(cgroups.cgroups.remove(group), "a group with a live process stays")
      } finally {
        child.kill("SIGKILL")
        yield* Effect.ignore(Effect.sandbox(pollUntil(Effect.sync(() => cgroups.cgroups.remove(group)), (removed) => removed, "the group removed", { every: 25, within: 1_000 })))
      }
      assert.isFalse(Fs.existsSync(group))
    }))

  it.skipIf(cgroups._tag !== "Available")("the start-up sweep removes the groups of dead servers' guests, and only those", () => {
    if (cgroups._tag !== "Available") return
    const dead = cgroups.cgroups.make("999999999.1-7", 64 * MiB)
    const mine = cgroups.cgroups.make(`${serverTag()}-sweep-${process.pid}`, 64 * MiB)
    try {
      // Other servers' leftovers (a server killed with its guests' groups) may go in the same sweep.
      assert.isAtLeast(sweepCgroups(cgroups.cgroups, madeByLiveServer), 1)
      assert.isFalse(Fs.existsSync(dead), "a dead server's group is removed")
      assert.isTrue(Fs.existsSync(mine), "a live server's group is kept")
    } finally {
      cgroups.cgroups.remove(dead)
      cgroups.cgroups.remove(mine)
    }
  })
})
