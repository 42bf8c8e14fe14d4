import { assert, describe, it } from "@effect/vitest"
import {
  applyRequests,
  categoryOf,
  checkMaterials,
  digest,
  firstDraft,
  nameOf,
  readMessage
} from "../../src/distillation/Distiller.js"

/** The distiller's deterministic craft: limits, reading, drafting and the creator's requests. */

const GUIDE = `# Deploying the service

The service ships as a Docker image. Build it with \`docker build\` from the repository root.

## Configuration

Every setting is an environment variable. DATABASE_URL points at PostgreSQL; without it the service uses an embedded database.

\`\`\`sh
secret code that is not prose.
\`\`\`

- Run migrations before the first start.
- Keep the JWT secret out of the repository.
`

describe("distiller", () => {
  it("checks count, sizes, names and emptiness with messages that say what to fix", () => {
    const ok = { filename: "a.md", content: "text" }
    assert.isUndefined(checkMaterials([ok]))
    assert.include(checkMaterials([])!, "at least one file")
    assert.include(checkMaterials(Array(21).fill(ok))!, "at most 20 files per distillation; got 21")
    assert.isUndefined(checkMaterials(Array(20).fill(ok)))
    assert.include(checkMaterials([{ filename: "big", content: "é".repeat(100_001) }])!, "200002 bytes", "bytes, not characters")
    assert.isUndefined(checkMaterials([{ filename: "edge", content: "x".repeat(200_000) }]))
    assert.include(checkMaterials(Array(6).fill({ filename: "p", content: "x".repeat(180_000) }))!, "1080000 bytes in all")
    assert.include(checkMaterials([{ filename: " ", content: "x" }])!, "filename must be 1-200")
    assert.include(checkMaterials([{ filename: "f".repeat(201), content: "x" }])!, "filename must be 1-200")
    assert.include(checkMaterials([ok, { filename: "blank.md", content: "\n\t " }])!, "materials[1] (blank.md): the content is empty")
  })

  it("reads headings and key sentences, leaving code out", () => {
    const read = digest("deploying the service with docker", { filename: "guide.md", content: GUIDE })
    assert.deepStrictEqual(read.headings, ["Deploying the service", "Configuration"])
    assert.include(read.points, "The service ships as a Docker image.")
    assert.include(read.points, "Run migrations before the first start.")
    assert.isAtMost(read.points.length, 6)
    assert.notInclude(read.points.join(" "), "secret code")
  })

  it("drafts a grounded agent: name, description, category, cited instructions", () => {
    const materials = [{ filename: "guide.md", content: GUIDE }]
    const draft = firstDraft("deploying the service", materials, materials.map((m) => digest("deploying the service", m)))
    assert.strictEqual(draft.name, "Deploying The Service Expert")
    assert.strictEqual(draft.description, "Answers questions about deploying the service, grounded in one source file: guide.md.")
    assert.strictEqual(draft.category, "coding")
    assert.include(draft.instructions, "You are Deploying The Service Expert, an expert on deploying the service.")
    assert.include(draft.instructions, "### guide.md\nSections: Deploying the service; Configuration")
    assert.include(draft.instructions, "- The service ships as a Docker image. (guide.md)")
    assert.isAtMost(draft.instructions.length, 20_000)
    // Many large files stay within the instructions' limit.
    const many = Array.from({ length: 20 }, (_, i) => ({ filename: `f${i}.md`, content: `${"A long sentence about tea and more tea. ".repeat(2000)}` }))
    const big = firstDraft("tea", many, many.map((m) => digest("tea", m)))
    assert.isAtMost(big.instructions.length, 20_000)
  })

  it("names and categories", () => {
    assert.strictEqual(nameOf("travel guide"), "Travel Guide")
    assert.strictEqual(nameOf("x".repeat(300)).length, 90 + " Expert".length)
    assert.strictEqual(categoryOf("wine pairing", []), "lifestyle")
    assert.strictEqual(categoryOf("essay writing", []), "writing")
    assert.strictEqual(categoryOf("zzz", [{ filename: "a", content: "our sales and marketing strategy for customers" }]), "business")
    assert.strictEqual(categoryOf("zzz", []), "other")
  })

  it("reads requests line by line; anything else is a note", () => {
    assert.deepStrictEqual(readMessage("name: Deployer\nCategory = Coding\nAlso cover Kubernetes.\ncreate"), {
      name: "Deployer",
      category: "coding",
      notes: ["Also cover Kubernetes."],
      create: true
    })
    assert.isTrue(readMessage("Create the agent.").create)
    assert.isTrue(readMessage("please create it").create)
    assert.isFalse(readMessage("create a section about backups").create)
    assert.deepStrictEqual(readMessage("instructions: Answer in English.").notes, ["Answer in English."])

    const base = { name: "A", description: "d", category: "other", instructions: "Base." }
    const outcome = applyRequests(base, readMessage("category: astrology\nname: B\nOne.\n\nTwo."))
    assert.deepStrictEqual(outcome.changed, ["name → B", "a note added to the instructions"])
    assert.strictEqual(outcome.refused.length, 1)
    assert.include(outcome.refused[0]!, "not a category")
    assert.strictEqual(outcome.draft.category, "other")
    assert.strictEqual(outcome.draft.instructions, "Base.\n\n## Notes from the creator\n- One.\n  \n  Two.")
    const more = applyRequests(outcome.draft, readMessage("Three."))
    assert.strictEqual(more.draft.instructions, "Base.\n\n## Notes from the creator\n- One.\n  \n  Two.\n- Three.")
    assert.include(applyRequests(base, { notes: ["x".repeat(20_000)], create: false }).refused[0]!, "exceed 20000")
  })
})
