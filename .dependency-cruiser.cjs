/**
 * The architecture check (DESIGN.md §5, docs/architecture.md): imports run one way, down the layers, without cycles.
 * `npm run check:architecture` fails the build when one runs back up. The only exception is the HttpApi pattern:
 * a domain's `Http.ts` (its handlers) imports `src/Api.ts` (the whole API) to implement its group.
 */
const LAYERS = [
  ["platform"],
  ["identity", "notifications"],
  ["files", "credentials"],
  ["environments"],
  ["runtime"],
  ["billing", "agents", "knowledge", "traces"],
  ["runs"],
  ["market", "sessions", "responses", "evolution", "distillation", "webhooks", "memory", "evals", "schedules"],
  ["mcp"]
]

const folders = (names) => `^src/(${names.join("|")})/`

/**
 * The contract layer (docs/architecture.md, "Contracts"): what the web app and `atrium/client` may import. The API
 * (`Api.ts` files: HttpApi groups and endpoints), each domain's `Domain.ts` (its wire errors, middleware tags, ids and
 * schemas), the entity RPC contracts (`*Rpc.ts`), and the few shared modules of wire schemas that predate the layout.
 */
const CONTRACT = [
  "^src/Api\\.ts$",
  "^src/[^/]+/Api\\.ts$",
  "^src/[^/]+/[^/]+/Api\\.ts$",
  "^src/[^/]+/Domain\\.ts$",
  "^src/[^/]+/[A-Za-z]+Rpc\\.ts$",
  "^src/platform/(Errors|Ids|Money)\\.ts$",
  "^src/platform/http/(Lists|Headers)\\.ts$",
  "^src/agents/Agent\\.ts$",
  "^src/runtime/Expert\\.ts$",
  "^src/identity/oauth/OpenApi\\.ts$"
]
const CONTRACT_PATH = `(${CONTRACT.join("|")})`

/** What a contract may import from packages: Effect, and the definition (not the serving) side of the platform. */
const CONTRACT_PACKAGES = [
  "effect/",
  "@effect/platform/dist/[^/]+/(HttpApi|HttpApiGroup|HttpApiEndpoint|HttpApiSchema|HttpApiMiddleware|HttpApiSecurity|HttpApiError|OpenApi|Multipart)\\.",
  "@effect/rpc/dist/[^/]+/Rpc\\.",
  "@effect/cluster/dist/[^/]+/(Entity|ClusterSchema)\\."
]

const layerRules = LAYERS.slice(0, -1).map((layer, index) => ({
  name: `layer-${layer.join("-")}`,
  comment: `${layer.join(", ")} may import only the layers below or beside it, never ${LAYERS.slice(index + 1).flat().join(", ")}`,
  severity: "error",
  from: { path: folders(layer) },
  to: { path: folders(LAYERS.slice(index + 1).flat()) }
}))

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      comment: "A cycle makes two modules one: split what both need into a lower module, or turn one side into a port.",
      severity: "error",
      from: { path: "^src/" },
      to: { circular: true }
    },
    ...layerRules,
    {
      name: "top-only-from-http",
      comment: "src/Api.ts, src/Server.ts and src/main.ts sit above every domain; only a domain's Http.ts imports Api.ts.",
      severity: "error",
      from: { path: "^src/[^/]+/", pathNot: "Http\\.ts$" },
      to: { path: "^src/(Api|Server|main)\\.ts$" }
    },
    {
      name: "http-imports-api-only",
      comment: "A handler file may import the HttpApi, not the server or the entry point.",
      severity: "error",
      from: { path: "^src/[^/]+/.*Http\\.ts$" },
      to: { path: "^src/(Server|main)\\.ts$" }
    },
    {
      name: "contract-imports-contracts-only",
      comment: "A contract (Api.ts, Domain.ts, *Rpc.ts, ...) imports only other contracts: never a service, repository, " +
        "SQL, config read or the server. Move what it needs into a contract module.",
      severity: "error",
      from: { path: CONTRACT_PATH },
      to: { path: "^src/", pathNot: CONTRACT_PATH }
    },
    {
      name: "contract-no-node",
      comment: "A contract runs in the browser: no node:* module.",
      severity: "error",
      from: { path: CONTRACT_PATH },
      to: { dependencyTypes: ["core"] }
    },
    {
      name: "contract-packages",
      comment: "A contract imports effect and the definition side of @effect/platform (HttpApi*, OpenApi), and an " +
        "entity contract @effect/rpc's Rpc and @effect/cluster's Entity; nothing that serves, stores or reads config.",
      severity: "error",
      from: { path: CONTRACT_PATH },
      to: { dependencyTypes: ["npm", "npm-dev", "npm-peer", "npm-optional", "npm-no-pkg", "npm-unknown"], pathNot: `node_modules/(${CONTRACT_PACKAGES.join("|")})` }
    },
    {
      name: "web-imports-contracts-only",
      comment: "The web app is given the API's contract, never the server: web/ imports from src/ only contracts.",
      severity: "error",
      from: { path: "^web/" },
      to: { path: "^src/", pathNot: CONTRACT_PATH }
    },
    {
      name: "client-imports-contracts-only",
      comment: "atrium/client (src/client.ts) runs where the caller runs: it imports only contracts.",
      severity: "error",
      from: { path: "^src/client\\.ts$" },
      to: { path: "^src/", pathNot: CONTRACT_PATH }
    },
    {
      name: "src-not-from-tests",
      comment: "Production code never imports test support.",
      severity: "error",
      from: { path: "^src/" },
      to: { path: "^(test|bench|scripts)/" }
    }
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    // Type-only imports count: a type from a higher layer is a dependency on it all the same.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { extensions: [".ts", ".tsx", ".js"] }
  }
}
