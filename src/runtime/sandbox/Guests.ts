import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

/**
 * What the host keeps about its guest processes beyond one call (docs/tools.md, "Containment"): their working
 * folders, named after the server that made them so a later server can tell which are orphans; their uids, one per
 * live guest; their memory as the kernel counts it.
 */

/** A process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat): with the pid, it names one process. */
const startTime = (pid: number): string | undefined => {
  try {
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    // The command name (field 2) may hold spaces and parentheses: the fields after it follow the last ')'.
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]
  } catch {
    return undefined
  }
}

const FOLDER = /^atrium-sandbox-(\d+)\.(\d+)-/
const SERVER = /^(\d+)\.(\d+)-/

/** This server as guests' things name it: `<pid>.<start time>`, which no later process repeats. */
export const serverTag = (): string => `${process.pid}.${startTime(process.pid) ?? "0"}`

/** Whether the server a `<pid>.<start time>-…` name was made by still runs (a name of another form: assumed so). */
export const madeByLiveServer = (name: string): boolean => {
  const match = SERVER.exec(name)
  return match === null || startTime(Number(match[1])) === match[2]
}

/** The prefix of this server's guests' working folders: `atrium-sandbox-<pid>.<start time>-`. */
export const workdirPrefix = (): string =>
  Path.join(Os.tmpdir(), `atrium-sandbox-${process.pid}.${startTime(process.pid) ?? "0"}-`)

/**
 * Removes the working folders of guests whose server is gone (killed with -9, say: nothing ran its finalizers). A
 * folder of a live server is kept, whoever's it is: several servers may share a temporary directory. Folders named
 * the older way (without their server) are left alone, since their owner cannot be told.
 */
export const sweepWorkdirs = (): ReadonlyArray<string> => {
  const removed: Array<string> = []
  let entries: Array<string>
  try {
    entries = Fs.readdirSync(Os.tmpdir())
  } catch {
    return removed
  }
  for (const name of entries) {
    const match = FOLDER.exec(name)
    if (match === null || startTime(Number(match[1])) === match[2]) continue
    try {
      Fs.rmSync(Path.join(Os.tmpdir(), name), { recursive: true, force: true })
      removed.push(name)
    } catch {
      // Another server's sweep got there first, or it is not ours to remove: left as it is.
    }
  }
  return removed
}

/** The guests' uids, `base` .. `base + count - 1`: each live guest holds one, the lowest free, until it ends. */
export const makeUidPool = (base: number, count: number) => {
  const taken = new Set<number>()
  return {
    take: (): number | undefined => {
      for (let uid = base; uid < base + count; uid++) {
        if (!taken.has(uid)) {
          taken.add(uid)
          return uid
        }
      }
      return undefined
    },
    give: (uid: number) => void taken.delete(uid),
    size: () => taken.size
  } as const
}

/** A process's resident memory in bytes (VmRSS), or undefined once it is gone. */
export const residentBytes = (pid: number): number | undefined => {
  try {
    const kb = /^VmRSS:\s*(\d+)\s*kB/m.exec(Fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]
    return kb === undefined ? undefined : Number(kb) * 1024
  } catch {
    return undefined
  }
}
