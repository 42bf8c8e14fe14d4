import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import { checkCgroups } from "../../src/runtime/sandbox/Cgroup.js"
import { runCodeCapability } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import {
  balanceOf,
  hostOf,
  INTERNAL_TOKEN,
  JWT_SECRET,
  liveGuests,
  login,
  PHONE_A,
  platform,
  runCode,
  SECRETS_KEY,
  sessionFor
} from "./sandbox-support.js"

/**
 * Sandbox containment against the build users run (issue 24): `dist/main.js` as a process, with the platform's
 * secrets set to values this test knows. Every probe is a guest's attempt to reach the host: its host files, its
 * environment, its processes, its network. Each is judged by what came out, never by whether an error happened:
 * - no secret value, no host file's content in anything the platform answered;
 * - no file written where only an escaped guest could write (a marker directory open to everyone);
 * - no connection to a listener this test opens on 127.0.0.1, nor to the platform's own port;
 * - the attacker's balance unchanged (the escape found before this issue granted itself credits).
 * The second test looks at the live guests from the outside (issue 42): what their processes hold and are, as
 * `/proc` shows it, and that `/api/health` names the layers a live guest was seen with.
 * The caps' fair share is `sandbox-fairness.test.ts`, run alone on a quiet machine.
 */

/** Every way back to Pyodide's internals by module name: none may answer. */
const REACH_INTERNALS = `import sys, importlib
found = [name for name in sys.modules if name == 'pyodide_js' or name.startswith('pyodide_js.')]
for name in ['pyodide_js', 'pyodide_js._api', 'pyodide_js._module']:
    try:
        importlib.import_module(name)
        found.append('import ' + name)
    except Exception:
        pass
found`

/** The probes: each names what it tries; `HOST_FILE`, `MARKER`, `PORT` and `PLATFORM_PORT` are filled in. */
const PYTHON_PROBES: ReadonlyArray<readonly [string, string]> = [
  ["the API module's Function constructor runs a host command", `import sys
api = sys.modules['pyodide_js._api']
api.tests.Function("return import('node:child_process').then(c => c.execFileSync('touch', ['MARKER/tests-function']).toString())")()`],
  ["the API module's Function constructor reads the environment", `import sys
sys.modules['pyodide_js._api'].tests.Function("return JSON.stringify(process.env)")()`],
  ["loadBinaryFile reads /proc/self/environ", `import sys
bytes(sys.modules['pyodide_js._api'].loadBinaryFile('/proc/self/environ').to_py())`],
  ["loadBinaryFile reads a host file", `import sys
bytes(sys.modules['pyodide_js._api'].loadBinaryFile('HOST_FILE').to_py())`],
  ["import pyodide_js", `import pyodide_js
str(pyodide_js._api.tests.Function("return process.env")())`],
  ["__import__ of the API submodule", `m = __import__('pyodide_js._api')
str(m)`],
  ["importlib of the API submodule", `import importlib
str(importlib.import_module('pyodide_js._api'))`],
  ["the module's NODEFS mounts the host", `import pyodide_js
FS = pyodide_js._module.FS
FS.mkdir('/host')
FS.mount(pyodide_js._module.NODEFS, {'root': '/'}, '/host')
open('/host/HOST_FILE').read()`],
  ["mountNodeFS", `import pyodide_js
pyodide_js.mountNodeFS('/mnt', '/')
open('/mnt/etc/passwd').read()`],
  ["the js module reaches process", `import js
str(js.process.env)`],
  ["the js module's eval", `import js
js.eval("process.env")`],
  ["run_js", `from pyodide.code import run_js
run_js("process.env.INTERNAL_TOKEN")`],
  ["a JavaScript object's constructor chain", `from pyodide.ffi import to_js
to_js({}).constructor.constructor('return process')().env`],
  ["an array's constructor chain", `from pyodide.ffi import to_js
to_js([1]).constructor.constructor('return process.env')()`],
  ["a kept JS function's constructor", `import pyodide.webloop as w
w.scheduleCallback.constructor('return process.env')()`],
  ["loadedPackages' constructor chain", `import pyodide._package_loader as p
p.loadedPackages.constructor.constructor('return process.env')()`],
  ["the import hook's JS module table", `import _pyodide._importhook as h
str({k: str(v) for k, v in h.jsfinder.jsproxies.items()})`],
  ["every JsProxy in every module", `import sys
from pyodide.ffi import JsProxy
found = []
for m in list(sys.modules.values()):
    for k in dir(m):
        try:
            v = getattr(m, k)
        except Exception:
            continue
        if isinstance(v, JsProxy):
            try:
                found.append(str(v.constructor.constructor('return process.env')()))
            except Exception as e:
                found.append(repr(e))
found`],
  ["ctypes reaches libc", `import ctypes
ctypes.CDLL(None).system(b"touch MARKER/ctypes")`],
  ["os.system", `import os
os.system('touch MARKER/os-system')`],
  ["subprocess", `import subprocess
subprocess.run(['touch', 'MARKER/subprocess'])`],
  ["os.fork", `import os
os.fork()`],
  ["os.popen", `import os
os.popen('id').read()`],
  ["a raw _socket to the listener", `import _socket
s = _socket.socket()
s.connect(('127.0.0.1', PORT))`],
  ["socket.create_connection to the listener", `import socket
socket.create_connection(('127.0.0.1', PORT))`],
  ["urllib to the platform's internal API", `import urllib.request
urllib.request.urlopen('http://127.0.0.1:PLATFORM_PORT/api/health').read()`],
  ["pyfetch to the listener", `from pyodide.http import pyfetch
await pyfetch('http://127.0.0.1:PORT/')`],
  ["the node socket file system", `import sys
api = sys.modules['pyodide_js._api']
api.initializeNodeSockFS()
str(api._nodeSock)`],
  ["/proc/self/environ by path", `open('/proc/self/environ').read()`],
  ["/etc/passwd by absolute path", `open('/etc/passwd').read()`],
  ["/etc/passwd by relative path", `open('../../../../../../etc/passwd').read()`],
  ["the host file by absolute path", `open('HOST_FILE').read()`],
  ["a symlink in the workspace to a host file", `import os
os.symlink('HOST_FILE', 'link.txt')
open('link.txt').read()`],
  ["a symlink in the workspace to /proc", `import os
os.symlink('/proc/self/environ', 'env.txt')
open('env.txt').read()`],
  ["the environment as Python sees it", `import os
dict(os.environ)`],
  ["a walk over the root file system", `import os
sorted(os.listdir('/'))`],
  ["object subclasses to a wrapper with a system call", `[c.__name__ for c in object.__subclasses__() if 'wrap_close' in c.__name__ or 'Popen' in c.__name__]`],
  ["writing outside the workspace", `open('/tmp/pwned', 'w').write('x')
open('/tmp/pwned').read()`]
]

const JS_PROBES: ReadonlyArray<readonly [string, string]> = [
  ["globalThis walk", `Object.getOwnPropertyNames(globalThis).join(",")`],
  ["process and require", `[typeof process, typeof require, typeof module, typeof Buffer].join(",")`],
  ["Function constructor to the host", `Function('return typeof process')()`],
  ["constructor chain", `({}).constructor.constructor('return this')().process`],
  ["dynamic import of node:fs", `import('node:fs').then((fs) => fs.readFileSync('HOST_FILE', 'utf8'))`],
  ["prototype pollution", `Object.prototype.toJSON = () => 'polluted'; Object.prototype.polluted = 'HOST'; ({a: 1})`],
  ["fs by absolute path", `fs.readFile('/etc/passwd')`],
  ["fs by relative path", `fs.readFile('../../../etc/passwd')`],
  ["fs writes outside", `fs.writeFile('/tmp/pwned', 'x')`],
  ["fetch to the listener", `fetch('http://127.0.0.1:PORT/')`],
  ["the env object", `JSON.stringify(env)`]
]

describe("sandbox escape (dist/main.js, secrets set)", () => {
  layer(platform({ SANDBOX_TIME_MS: "10000" }), { timeout: 600_000, excludeTestServices: true })((it) => {
    it.effect("every probe leaks nothing: no secret, no host file, no process, no connection, no credits", () =>
      Effect.gen(function*() {
        const host = yield* hostOf
        const token = yield* login(PHONE_A)
        const before = yield* balanceOf(token)
        const session = yield* sessionFor(token)
        const platformPort = new URL((yield* TestServer).url).port
        const fill = (code: string) =>
          code.replaceAll("HOST_FILE", host.hostFile).replaceAll("MARKER", host.markers)
            .replaceAll("PLATFORM_PORT", platformPort).replaceAll("PORT", String(host.port))

        const working = yield* runCode(token, session, "python", "6 * 7")
        assert.strictEqual(working.result?.result, 42, working.raw)
        const passwd = Fs.readFileSync("/etc/passwd", "utf8").split("\n")[0]!
        const leaks = [INTERNAL_TOKEN, SECRETS_KEY, JWT_SECRET, host.hostContent, passwd, "postgres://"]
        const probes = [
          ...PYTHON_PROBES.map(([name, code]) => ["python", name, code] as const),
          ...JS_PROBES.map(([name, code]) => ["javascript", name, code] as const)
        ]
        assert.isAtLeast(probes.length, 45)
        for (const [language, name, code] of probes) {
          const outcome = yield* runCode(token, session, language, fill(code))
          for (const leak of leaks) {
            assert.notInclude(outcome.raw, leak, `${language} probe "${name}" leaked: ${outcome.raw.slice(0, 2000)}`)
          }
          // Each probe either failed or answered something harmless: nothing that names the host's process.
          assert.notMatch(outcome.raw, /uid=0\(root\)|\/work\/|node_modules\/(?!pyodide)/, `${name}: ${outcome.raw.slice(0, 2000)}`)
        }
        assert.deepStrictEqual(Fs.readdirSync(host.markers), [], "no probe wrote on the host")
        assert.isFalse(Fs.existsSync("/tmp/pwned"), "no probe wrote in the host's /tmp")
        assert.deepStrictEqual(host.connections, [], "no probe connected to the host's listener")
        // The probes' own turns are billed as any turn; an escape once granted itself credits instead.
        assert.isAtMost(yield* balanceOf(token), before, "the attacker's balance did not grow")
        assert.notInclude(host.output(), INTERNAL_TOKEN)

        const after = yield* runCode(token, session, "python", "6 * 7")
        assert.strictEqual(after.result?.result, 42, `the sandbox still works after the probes: ${after.raw}`)
        const capability = yield* runCodeCapability
        assert.strictEqual(capability.status, "available", JSON.stringify(capability))
      }), 600_000)

    it.effect("the live guests: no server variable, no Pyodide internals, own uids and PID namespaces, memory bounded", () =>
      Effect.gen(function*() {
        const host = yield* hostOf
        const token = yield* login(PHONE_A)
        const first = yield* sessionFor(token)
        const second = yield* sessionFor(token)
        const reach = yield* runCode(token, first, "python", REACH_INTERNALS)
        assert.deepStrictEqual(reach.result?.result, [], `pyodide_js is reachable: ${reach.raw}`)
        const other = yield* runCode(token, second, "javascript", "1 + 1")
        assert.strictEqual(other.result?.result, 2, other.raw)

        // The guest's own /proc/self/environ is out of its reach (Node's permission model): read from the host.
        const guests = liveGuests(host.pid)
        assert.isAtLeast(guests.length, 2, "both sessions' guests are alive")
        const uids = new Set<string>()
        for (const guest of guests) {
          const names = guest.environ.split("\0").filter(Boolean).map((entry) => entry.split("=")[0])
          assert.deepStrictEqual(names.filter((name) => !name!.startsWith("NODE_CHANNEL_")), [], `guest ${guest.pid}'s environment`)
          for (const leak of [INTERNAL_TOKEN, SECRETS_KEY, JWT_SECRET, "DATA_DIR", "PATH="]) assert.notInclude(guest.environ, leak)
          const uid = /^Uid:\s+(\d+)/m.exec(guest.status)![1]!
          assert.notStrictEqual(uid, "0", "a root server's guest runs unprivileged")
          uids.add(uid)
          assert.strictEqual(/^NSpid:.*\s(\d+)$/m.exec(guest.status)?.[1], "1", `guest ${guest.pid} is PID 1 of its own namespace`)
          assert.match(guest.limits, /^Max data size\s+\d+\s+\d+\s+bytes/m, "its memory has an OS bound")
        }
        assert.strictEqual(uids.size, guests.length, `every live guest has a uid of its own: ${[...uids].join(", ")}`)

        // /api/health names the layers seen in a live guest at start, not the configured list.
        const capability = (yield* runCodeCapability) as { status: string; detail: string; layers?: Array<string> }
        assert.strictEqual(capability.status, "available", JSON.stringify(capability))
        const layers = (capability.layers ?? []).join(" | ")
        for (const layer of [/empty environment/, /own uid \d+ \(not root\)/, /network namespace \(lo only\)/, /PID namespace \(PID 1\)/, /RLIMIT_DATA \d+ MiB/]) {
          assert.match(layers, layer)
        }
        // Where the host gives memory cgroups, each guest is seen in one of its own, with its bound.
        if (checkCgroups()._tag === "Available") assert.match(layers, /memory cgroup \d+ MiB/)

        // Buffers outside WebAssembly count too: 25 x 100 MiB (2.5 GiB) stops at the process's bound as `memory`.
        const memory = yield* runCode(
          token,
          first,
          "python",
          "from pyodide.ffi import to_js\nkeep = [to_js(bytes(100 * 1024 * 1024)) for _ in range(25)]\nlen(keep)"
        )
        assert.include(memory.failure ?? "", "(memory)", memory.raw.slice(0, 2000))
        const after = yield* runCode(token, second, "python", "6 * 7")
        assert.strictEqual(after.result?.result, 42, `the platform still runs code: ${after.raw}`)
      }), 300_000)
  })
})
