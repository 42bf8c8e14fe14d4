// `npm run build:server`: the compiled server in `dist/`, made anew each time, with every file the code loads at run
// time beside it. The rest of `src/` (the sandbox's guest script, any `.mjs`, `.json`, `.sql` or `.wasm` loaded
// through `import.meta.url`) is copied as it is, so `dist/` runs on its own (`npm start`, the container image).
// Documentation (`.md`) stays behind.
//
// Types are not checked here: `npm run typecheck` checks them (CI's second step), and checking them again in every
// build was two thirds of it (tsc's check 20 s of a 30 s build on the 2-core machine, session 35). Each module is
// transpiled alone (`ts.transpileModule`), which gives what tsc's emit gives since the sources compile with
// `isolatedModules`. Declarations are emitted for `atrium/client` (the package's one typed export) and what it imports.
import * as Fs from "node:fs"
import * as Path from "node:path"
import ts from "typescript"

const root = Path.resolve(import.meta.dirname, "..")
const src = Path.join(root, "src")
const dist = Path.join(root, "dist")

const config = ts.getParsedCommandLineOfConfigFile(Path.join(root, "tsconfig.build.json"), {}, {
  ...ts.sys,
  onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
    throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"))
  }
})
const options = config.options
const format = {
  getCanonicalFileName: (name) => name,
  getCurrentDirectory: () => root,
  getNewLine: () => "\n"
}

Fs.rmSync(dist, { recursive: true, force: true })

// Every module of src/, transpiled with the build's options; a syntax error stops the build.
const failures = []
for (const file of config.fileNames) {
  if (file.endsWith(".d.ts")) continue
  const out = Path.join(dist, Path.relative(src, file)).replace(/\.tsx?$/, ".js")
  const result = ts.transpileModule(Fs.readFileSync(file, "utf8"), {
    // ES modules, as NodeNext emits them for this package ("type": "module"), which a module alone cannot look up.
    compilerOptions: { ...options, module: ts.ModuleKind.ES2022, moduleResolution: ts.ModuleResolutionKind.Bundler },
    fileName: file,
    reportDiagnostics: true
  })
  failures.push(...(result.diagnostics ?? []))
  Fs.mkdirSync(Path.dirname(out), { recursive: true })
  Fs.writeFileSync(out, result.outputText)
  if (result.sourceMapText !== undefined) {
    // Named as tsc names them: the map beside its module, its source relative to it.
    const map = JSON.parse(result.sourceMapText)
    map.file = Path.basename(out)
    map.sources = [Path.relative(Path.dirname(out), file)]
    Fs.writeFileSync(`${out}.map`, JSON.stringify(map))
  }
}
if (failures.length > 0) {
  process.stderr.write(ts.formatDiagnostics(failures, format))
  process.exit(1)
}

// The declarations of the typed client (`exports["./client"].types` in package.json) and of what it imports.
const client = ts.createProgram({
  rootNames: [Path.join(src, "client.ts")],
  options: { ...options, declaration: true, emitDeclarationOnly: true, sourceMap: false }
})
const emitted = client.emit(undefined, undefined, undefined, true)
if (emitted.emitSkipped) {
  process.stderr.write(ts.formatDiagnostics(emitted.diagnostics, format))
  process.exit(1)
}

const compiled = /\.(ts|tsx)$/
const copyAssets = (dir) => {
  for (const entry of Fs.readdirSync(dir, { withFileTypes: true })) {
    const from = Path.join(dir, entry.name)
    if (entry.isDirectory()) copyAssets(from)
    else if (!compiled.test(entry.name) && !entry.name.endsWith(".md")) {
      const to = Path.join(dist, Path.relative(src, from))
      Fs.mkdirSync(Path.dirname(to), { recursive: true })
      Fs.copyFileSync(from, to)
    }
  }
}
copyAssets(src)
