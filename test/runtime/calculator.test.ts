import { assert, describe, it } from "@effect/vitest"
import { CalculatorError, evaluate } from "../../src/runtime/tools/Calculator.js"

/** The `calculator` tool's arithmetic (issue 5 item 6): what it computes, and what it refuses. */

const fails = (expression: string, message?: RegExp) => {
  assert.throws(() => evaluate(expression), CalculatorError, message, expression)
}

describe("calculator", () => {
  it("follows precedence: * / % before + -, left to right", () => {
    assert.strictEqual(evaluate("2 + 3 * 4"), 14)
    assert.strictEqual(evaluate("2 * 3 + 4"), 10)
    assert.strictEqual(evaluate("10 - 4 - 3"), 3)
    assert.strictEqual(evaluate("100 / 10 / 5"), 2)
    assert.strictEqual(evaluate("7 % 4 * 2"), 6)
    assert.strictEqual(evaluate("1 + 10 % 4"), 3)
    assert.strictEqual(evaluate("8 - 2 * 3 + 1"), 3)
    assert.strictEqual(evaluate("1.5 * 4"), 6)
    assert.strictEqual(evaluate(".5 + .25"), 0.75)
    assert.strictEqual(evaluate("1e3 + 1"), 1001)
    assert.strictEqual(evaluate("  42  "), 42)
    assert.strictEqual(evaluate("7/2"), 3.5)
  })

  it("parentheses group", () => {
    assert.strictEqual(evaluate("(2 + 3) * 4"), 20)
    assert.strictEqual(evaluate("2 * (3 + 4) * (1 + 1)"), 28)
    assert.strictEqual(evaluate("((((1))))"), 1)
    assert.strictEqual(evaluate("(10 - (4 - 3))"), 9)
    assert.strictEqual(evaluate("(2 + 3)^2"), 25)
  })

  it("unary minus and plus", () => {
    assert.strictEqual(evaluate("-3"), -3)
    assert.strictEqual(evaluate("-3 + 5"), 2)
    assert.strictEqual(evaluate("5 - -3"), 8)
    assert.strictEqual(evaluate("--3"), 3)
    assert.strictEqual(evaluate("2 * -3"), -6)
    assert.strictEqual(evaluate("-(2 + 3)"), -5)
    assert.strictEqual(evaluate("+4"), 4)
    assert.strictEqual(evaluate("-2 * -2"), 4)
  })

  it("power is right-associative and binds tighter than unary minus on its left", () => {
    assert.strictEqual(evaluate("2 ^ 10"), 1024)
    assert.strictEqual(evaluate("2 ^ 3 ^ 2"), 512)
    assert.strictEqual(evaluate("-2 ^ 2"), -4)
    assert.strictEqual(evaluate("2 ^ -1"), 0.5)
    assert.strictEqual(evaluate("3 * 2 ^ 2"), 12)
    assert.strictEqual(evaluate("(-2) ^ 2"), 4)
    assert.strictEqual(evaluate("4 ^ 0.5"), 2)
  })

  it("refuses malformed expressions", () => {
    fails("", /empty/)
    fails("   ", /empty/)
    fails("2 +", /end of expression/)
    fails("(2 + 3", /closing parenthesis/)
    fails("2 + 3)", /unexpected "\)"/)
    fails("2 3")
    fails("* 2")
    fails("()")
    fails("2 ** 3")
    fails("1..2")
    fails("2 + ^ 3")
  })

  it("refuses division by zero and results that are not finite", () => {
    fails("1 / 0", /division by zero/)
    fails("1 % 0", /division by zero/)
    fails("5 / (2 - 2)", /division by zero/)
    fails("10 ^ 400", /finite/)
  })

  it("refuses letters and anything that is not arithmetic, so nothing is ever evaluated as code", () => {
    fails("x + 1", /unexpected "x"/)
    fails("2 + abc")
    fails("Math.PI")
    fails("process.exit(1)")
    fails("sqrt(4)")
    fails("1; 2")
    fails("2 = 2")
    fails("0x10")
    fails("Infinity")
    fails("NaN")
  })

  it("refuses an expression that is too long", () => {
    fails("1+".repeat(600) + "1", /longer than/)
    assert.strictEqual(evaluate("1+".repeat(400) + "1"), 401)
  })
})
