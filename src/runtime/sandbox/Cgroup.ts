import * as Fs from "node:fs"
import * as Path from "node:path"

/**
 * A memory cgroup per guest, where the host gives one (issue 42 item 2): `RLIMIT_DATA` bounds what a guest maps
 * privately, and the cgroup bounds what the kernel charges it in all (anonymous and shared memory, the page cache of
 * what it reads, kernel memory), and the kernel's OOM killer ends the guest at the bound. It needs a writable memory
 * controller: a root server with cgroup v1's `memory` hierarchy, or cgroup v2 with `memory` delegated to the
 * server's own group. Elsewhere (a non-root server, a read-only /sys/fs/cgroup) guests run without it, and the start
 * log and `/api/health` say so; `RLIMIT_DATA` and the resident-memory watch still hold.
 *
 * The groups live under `<the server's own group>/atrium-guests/`, named after the server that made them
 * (`<pid>.<start time>-<n>`) so a later server's sweep knows the orphans, as for the working folders (`Guests.ts`).
 */
export interface GuestCgroups {
  readonly version: "v1" | "v2"
  /** The folder that holds the guests' groups. */
  readonly root: string
  /**
   * Makes one guest's group with its memory bound (swap included where the host accounts it) and returns its
   * folder; the launcher moves itself into it before anything else runs (`Containment.command`).
   */
  readonly make: (name: string, bytes: number) => string
  /** The bound the group holds, as the kernel reports it. */
  readonly limitOf: (group: string) => number | undefined
  /** Whether the kernel's OOM killer ended a process of the group: the guest passed its memory bound. */
  readonly oomKilled: (group: string) => boolean
  /** Removes a group once its processes have ended (the kernel refuses while one lives). */
  readonly remove: (group: string) => boolean
}

export type CgroupCheck =
  | { readonly _tag: "Available"; readonly cgroups: GuestCgroups }
  | { readonly _tag: "Unavailable"; readonly reason: string }

const read = (file: string) => {
  try {
    return Fs.readFileSync(file, "utf8")
  } catch {
    return undefined
  }
}

const write = (file: string, value: string) => {
  try {
    Fs.writeFileSync(file, value)
    return true
  } catch {
    return false
  }
}

interface Mount {
  readonly root: string
  readonly point: string
  readonly type: string
  readonly options: string
}

/** The cgroup file systems this process sees (/proc/self/mountinfo: root, mount point, type, super options). */
const cgroupMounts = (): ReadonlyArray<Mount> =>
  (read("/proc/self/mountinfo") ?? "").split("\n").flatMap((line) => {
    const [before, after] = line.split(" - ")
    if (before === undefined || after === undefined) return []
    const fields = before.split(" ")
    const [type, , options] = after.split(" ")
    if (type !== "cgroup" && type !== "cgroup2") return []
    return [{ root: fields[3]!, point: fields[4]!, type, options: options ?? "" }]
  })

/** A process's group in one hierarchy, from its `/proc/<pid>/cgroup`: v1's `memory` line, or v2's single line. */
const groupPath = (version: "v1" | "v2", text: string): string | undefined =>
  (version === "v1" ? /^\d+:(?:[^:]*,)?memory(?:,[^:]*)?:(.*)$/m : /^0::(.*)$/m).exec(text)?.[1]

/** This process's own group in a hierarchy, as a folder under the mount that shows it. */
const ownFolder = (mount: Mount, path: string) => {
  const relative = mount.root === "/" ? path : path.startsWith(mount.root) ? path.slice(mount.root.length) : undefined
  return relative === undefined ? undefined : Path.join(mount.point, relative)
}

const v1 = (): CgroupCheck => {
  const mount = cgroupMounts().find((m) => m.type === "cgroup" && m.options.split(",").includes("memory"))
  if (mount === undefined) return { _tag: "Unavailable", reason: "no cgroup v1 memory hierarchy is mounted" }
  const path = groupPath("v1", read("/proc/self/cgroup") ?? "")
  const own = path === undefined ? undefined : ownFolder(mount, path)
  if (own === undefined) return { _tag: "Unavailable", reason: "this process's memory cgroup is not visible" }
  const root = Path.join(own, "atrium-guests")
  try {
    Fs.mkdirSync(root, { recursive: true })
  } catch (error) {
    return { _tag: "Unavailable", reason: `the memory cgroup ${own} is not writable (${(error as Error).message})` }
  }
  return {
    _tag: "Available",
    cgroups: {
      version: "v1",
      root,
      make: (name, bytes) => {
        const group = Path.join(root, name)
        Fs.mkdirSync(group)
        Fs.writeFileSync(Path.join(group, "memory.limit_in_bytes"), String(bytes))
        // Memory and swap together, where the kernel accounts swap: a guest cannot page its excess out.
        write(Path.join(group, "memory.memsw.limit_in_bytes"), String(bytes))
        return group
      },
      limitOf: (group) => {
        const value = Number(read(Path.join(group, "memory.limit_in_bytes")))
        return Number.isFinite(value) ? value : undefined
      },
      oomKilled: (group) => Number(/^oom_kill (\d+)/m.exec(read(Path.join(group, "memory.oom_control")) ?? "")?.[1] ?? 0) > 0,
      remove
    }
  }
}

const v2 = (): CgroupCheck => {
  const mount = cgroupMounts().find((m) => m.type === "cgroup2")
  if (mount === undefined) return { _tag: "Unavailable", reason: "no cgroup hierarchy with a memory controller is mounted" }
  const path = groupPath("v2", read("/proc/self/cgroup") ?? "")
  const own = path === undefined ? undefined : ownFolder(mount, path)
  if (own === undefined) return { _tag: "Unavailable", reason: "this process's cgroup is not visible" }
  if (!(read(Path.join(own, "cgroup.controllers")) ?? "").split(/\s+/).includes("memory")) {
    return { _tag: "Unavailable", reason: `the memory controller is not delegated to ${own}` }
  }
  const root = Path.join(own, "atrium-guests")
  try {
    Fs.mkdirSync(root, { recursive: true })
    // A group's controllers reach its children only through subtree_control; cgroup v2 refuses it on a group with
    // processes of its own (other than the root), which is then reported as unavailable.
    Fs.writeFileSync(Path.join(own, "cgroup.subtree_control"), "+memory")
    Fs.writeFileSync(Path.join(root, "cgroup.subtree_control"), "+memory")
  } catch (error) {
    return { _tag: "Unavailable", reason: `the cgroup ${own} cannot hold guests' groups (${(error as Error).message})` }
  }
  return {
    _tag: "Available",
    cgroups: {
      version: "v2",
      root,
      make: (name, bytes) => {
        const group = Path.join(root, name)
        Fs.mkdirSync(group)
        Fs.writeFileSync(Path.join(group, "memory.max"), String(bytes))
        write(Path.join(group, "memory.swap.max"), "0")
        return group
      },
      limitOf: (group) => {
        const value = Number(read(Path.join(group, "memory.max")))
        return Number.isFinite(value) ? value : undefined
      },
      oomKilled: (group) => Number(/^oom_kill (\d+)/m.exec(read(Path.join(group, "memory.events")) ?? "")?.[1] ?? 0) > 0,
      remove
    }
  }
}

const remove = (group: string) => {
  try {
    Fs.rmdirSync(group)
    return true
  } catch {
    return false
  }
}

/** The memory cgroups guests can get on this host, decided once at start. Only a root server moves processes. */
export const checkCgroups = (): CgroupCheck => {
  if (process.getuid?.() !== 0) return { _tag: "Unavailable", reason: "the server is not root" }
  const first = v1()
  if (first._tag === "Available") return first
  const second = v2()
  return second._tag === "Available"
    ? second
    : { _tag: "Unavailable", reason: `${first.reason}; ${second.reason}` }
}

/** The group a process is in, in the hierarchy of `cgroups` (from /proc/<pid>/cgroup, which the process cannot forge). */
export const groupOf = (cgroups: GuestCgroups, pid: number): string | undefined => {
  const path = groupPath(cgroups.version, read(`/proc/${pid}/cgroup`) ?? "")
  return path === undefined ? undefined : Path.basename(path)
}

/**
 * Removes the groups of guests whose server is gone, as `sweepWorkdirs` does for their folders. `alive` says
 * whether the server named in a group's name still runs.
 */
export const sweepCgroups = (cgroups: GuestCgroups, alive: (name: string) => boolean): number => {
  let removed = 0
  let names: Array<string>
  try {
    names = Fs.readdirSync(cgroups.root, { withFileTypes: true }).filter((entry) => entry.isDirectory()).map((entry) => entry.name)
  } catch {
    return 0
  }
  for (const name of names) if (!alive(name) && cgroups.remove(Path.join(cgroups.root, name))) removed++
  return removed
}
