/**
 * The architecture check (DESIGN.md §5, docs/architecture.md): imports run one way, down the layers, without cycles.
 * `npm run check:architecture` fails the build when one runs back up. The only exception is the HttpApi pattern:
 * a domain's `Http.ts` (its handlers) imports `src/Api.ts` (the whole API) to implement its group.
 */
const LAYERS = [
  ["platform"],
  ["identity", "notifications"],
  ["files", "environments", "credentials"],
  ["runtime"],
  ["billing", "agents", "knowledge"],
  ["market", "runs", "sessions", "responses", "evolution", "distillation"],
  ["mcp"]
]

const folders = (names) => `^src/(${names.join("|")})/`

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
    enhancedResolveOptions: { extensions: [".ts", ".js"] }
  }
}
