#!/usr/bin/env node
// The MCP conformance suite (@modelcontextprotocol/conformance) against the compiled server (issue 30, docs/mcp.md).
//
//   node scripts/mcp-conformance.mjs          (after `npm run build:server`; .ci/run runs it)
//
// 1. Installs the suite on demand outside the project (like bench/peer-langgraph's peer): into
//    $MCP_CONFORMANCE_PREFIX (default $TMPDIR/atrium-mcp-conformance), kept between runs.
// 2. Starts dist/main.js (embedded mode, a throwaway DATA_DIR) on a free port, and makes a fixture: a user with an
//    API key and two experts, one published for review, one run, so resources/list has something to list.
// 3. The suite's client sends no credentials (it has no option for them), so it talks to a small local proxy that
//    adds the fixture's `Authorization: Bearer sk_...` and passes everything else on as it is (the Host and Origin
//    of the DNS-rebinding scenario included).
// 4. Runs every active server scenario with scripts/mcp-conformance-baseline.yml as the expected failures: the
//    scenarios that need the suite's own fixtures (`test_*` tools, `test://` resources, `test_*` prompts) or that a
//    stateless server does not take part in. docs/mcp.md lists each with its reason. Exit 1 on any other failure,
//    and on a listed one that passes (the list is then stale).
import { execFileSync, spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Os from "node:os"
import * as Path from "node:path"

const VERSION = "0.1.16"
const ROOT = Path.resolve(import.meta.dirname, "..")
const PREFIX = process.env.MCP_CONFORMANCE_PREFIX ?? Path.join(Os.tmpdir(), "atrium-mcp-conformance")
const PACKAGE = Path.join(PREFIX, "node_modules", "@modelcontextprotocol", "conformance")
const BASELINE = Path.join(ROOT, "scripts", "mcp-conformance-baseline.yml")
const PHONE = "+15550009999"
const CODE = "424242"

const log = (message) => console.log(`[mcp-conformance] ${message}`)

const installed = () => {
  try {
    return JSON.parse(Fs.readFileSync(Path.join(PACKAGE, "package.json"), "utf8")).version === VERSION
  } catch {
    return false
  }
}
if (!installed()) {
  log(`installing @modelcontextprotocol/conformance@${VERSION} into ${PREFIX}`)
  Fs.mkdirSync(PREFIX, { recursive: true })
  execFileSync("npm", ["install", "--prefix", PREFIX, "--no-save", "--no-audit", "--no-fund", `@modelcontextprotocol/conformance@${VERSION}`], {
    stdio: "inherit"
  })
}

// The suite imports fs.globSync (Node 22) for a report command the server scenarios never use: on older Node a load
// hook puts a stub in its place, so the import does not fail.
const nodeMajor = Number(process.versions.node.split(".")[0])
const cliArgs = []
if (nodeMajor < 22) {
  const hook = Path.join(PREFIX, "globsync-hook.mjs")
  Fs.writeFileSync(hook, [
    "export async function load(url, context, nextLoad) {",
    "  const loaded = await nextLoad(url, context)",
    "  if (!url.includes('@modelcontextprotocol/conformance/dist/')) return loaded",
    "  const source = String(loaded.source)",
    "  const match = /globSync as (\\w+),/.exec(source)",
    "  if (match === null) return loaded",
    "  const body = source.replace(match[0], '').replace(/^#!.*\\n/, '')",
    "  return { ...loaded, source: `const ${match[1]}=()=>{throw Error('fs.globSync needs Node 22')};\\n` + body }",
    "}"
  ].join("\n"))
  const shim = Path.join(PREFIX, "globsync-shim.mjs")
  Fs.writeFileSync(shim, `import { register } from "node:module"\nregister(${JSON.stringify("file://" + hook)})\n`)
  cliArgs.push("--import", shim)
}
cliArgs.push(Path.join(PACKAGE, "dist", "index.js"))

const main = Path.join(ROOT, "dist", "main.js")
if (!Fs.existsSync(main)) {
  console.error("dist/main.js is missing: run `npm run build:server` first")
  process.exit(2)
}

const work = Fs.mkdtempSync(Path.join(Os.tmpdir(), "atrium-mcp-conformance-run-"))
const children = []
const cleanup = () => {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL")
  Fs.rmSync(work, { recursive: true, force: true })
}
process.on("exit", cleanup)
process.on("SIGINT", () => process.exit(130))
process.on("SIGTERM", () => process.exit(143))

// The server: embedded mode, whatever services the caller's environment names.
const env = { ...process.env, PORT: "0", HOST: "127.0.0.1", DATA_DIR: Path.join(work, "data"), SMS_TEST_OTP: `${PHONE}=${CODE}`, SMS_CHALLENGE_AFTER: "1000" }
for (const name of ["DATABASE_URL", "REDIS_URL", "KEY_PREFIX", "PUBLIC_URL", "MCP_PATH", "LOG_LEVEL"]) delete env[name]
const server = spawn(process.execPath, [main], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] })
children.push(server)
let output = ""
server.stdout.on("data", (chunk) => (output += chunk))
server.stderr.on("data", (chunk) => (output += chunk))
const base = await new Promise((resolve, reject) => {
  const deadline = setTimeout(() => reject(new Error(`the server did not start:\n${output.slice(-2000)}`)), 300_000)
  const check = setInterval(() => {
    const listening = /Listening on http:\/\/[^\s":]+:(\d+)/.exec(output)
    if (listening !== null) {
      clearInterval(check)
      clearTimeout(deadline)
      resolve(`http://127.0.0.1:${listening[1]}`)
    }
    if (server.exitCode !== null) {
      clearInterval(check)
      reject(new Error(`the server exited:\n${output.slice(-2000)}`))
    }
  }, 100)
})
log(`server at ${base}`)

const call = async (method, path, { token, body } = {}) => {
  const response = await fetch(base + path, {
    method,
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`)
  return text.length > 0 && response.headers.get("content-type")?.includes("json") ? JSON.parse(text) : text
}

// The fixture expert set: what the resources scenarios list (the caller's experts, a version, their runs).
const { token } = await call("POST", "/api/auth/login", { body: { phone: PHONE, code: CODE } })
const { key } = await call("POST", "/api/user/apiKey/create", { token, body: { name: "conformance" } })
const travel = await call("POST", "/v1/agents", { token, body: { name: "Conformance travel planner", description: "Plans trips", category: "other" } })
await call("POST", "/v1/agents", { token, body: { name: "Conformance code reviewer", description: "Reviews code", category: "coding" } })
await call("POST", `/v1/agents/${travel.identifier}/publish`, { token })
await call("POST", "/v1/agents/run", { token, body: { agent: travel.identifier, message: "hello", stream: false } })
log(`fixture: experts ${travel.identifier} (version 1, one run) and a second draft`)

// The proxy that gives the suite's client the fixture's credentials.
const target = new URL(base)
const proxy = Http.createServer((request, response) => {
  const upstream = Http.request(
    { host: target.hostname, port: target.port, path: request.url, method: request.method, headers: { ...request.headers, authorization: `Bearer ${key}` } },
    (answer) => {
      response.writeHead(answer.statusCode ?? 502, answer.headers)
      answer.pipe(response)
    }
  )
  upstream.on("error", () => response.destroy())
  request.pipe(upstream)
})
await new Promise((resolve) => proxy.listen(0, "127.0.0.1", resolve))
const url = `http://127.0.0.1:${proxy.address().port}/mcp`

log(`running the server scenarios against ${url} (expected failures: ${Path.relative(ROOT, BASELINE)})`)
const suite = spawn(process.execPath, [...cliArgs, "server", "--url", url, "--expected-failures", BASELINE], { cwd: work, stdio: "inherit" })
children.push(suite)
const code = await new Promise((resolve) => suite.on("exit", (exit) => resolve(exit ?? 1)))
proxy.close()
log(code === 0 ? "every scenario that applies passed" : `failed (exit ${code}); see the summary above`)
process.exit(code)
