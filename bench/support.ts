/**
 * What the load scripts in bench/ share: a JSON request over a keep-alive agent, a free port, percentiles and the
 * CPU time of a process. Scripts, not tests: nothing here asserts.
 */
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Net from "node:net"

/** One request through `agent`, its body parsed as JSON when it is JSON. */
export const call = (
  agent: Http.Agent,
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {}
) =>
  new Promise<{ status: number; body: any }>((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body)
    const request = Http.request(new URL(path, base), {
      method,
      agent,
      headers: {
        ...(payload !== undefined ? { "content-type": "application/json", "content-length": Buffer.byteLength(payload) } : {}),
        ...headers
      }
    }, (response) => {
      let text = ""
      response.setEncoding("utf8")
      response.on("data", (chunk) => (text += chunk))
      response.on("end", () => {
        let parsed: unknown = text
        try {
          parsed = JSON.parse(text)
        } catch {}
        resolve({ status: response.statusCode ?? 0, body: parsed })
      })
    })
    request.on("error", reject)
    if (payload !== undefined) request.write(payload)
    request.end()
  })


export const freePort = () =>
  new Promise<number>((resolve) => {
    const server = Net.createServer()
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as Net.AddressInfo
      server.close(() => resolve(port))
    })
  })

export const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!

/** utime + stime of a process, in seconds (Linux /proc). */
export const processCpu = (pid: number | undefined): number => {
  if (pid === undefined) return NaN
  try {
    const fields = Fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    return (Number(fields[11]) + Number(fields[12])) / 100
  } catch {
    return NaN
  }
}

