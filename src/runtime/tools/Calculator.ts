/**
 * The `calculator` tool's arithmetic: numbers, + - * / % ^, unary minus and parentheses, by recursive descent, so
 * nothing a model writes is ever evaluated as code. A malformed expression or a division by zero is an error the
 * tool reports (and the model sees), not a crash.
 */

export class CalculatorError extends Error {}

const MAX_LENGTH = 1000

export const evaluate = (expression: string): number => {
  if (expression.length > MAX_LENGTH) throw new CalculatorError(`expression longer than ${MAX_LENGTH} characters`)
  const tokens = expression.match(/\d+(?:\.\d+)?(?:e[+-]?\d+)?|\.\d+|[-+*/%^()]|\S/gi) ?? []
  let position = 0
  const peek = () => tokens[position]
  const take = () => tokens[position++]

  const primary = (): number => {
    const token = take()
    if (token === undefined) throw new CalculatorError("unexpected end of expression")
    if (token === "(") {
      const value = sum()
      if (take() !== ")") throw new CalculatorError("missing closing parenthesis")
      return value
    }
    if (token === "-") return -power()
    if (token === "+") return power()
    if (/^(\d|\.\d)/.test(token)) return Number(token)
    throw new CalculatorError(`unexpected "${token}"`)
  }
  // Right-associative, binding tighter than unary minus on its left: -2^2 = -4, 2^3^2 = 512.
  const power = (): number => {
    const base = primary()
    if (peek() === "^") {
      take()
      return base ** unary()
    }
    return base
  }
  const unary = (): number => {
    if (peek() === "-") {
      take()
      return -unary()
    }
    if (peek() === "+") {
      take()
      return unary()
    }
    return power()
  }
  const product = (): number => {
    let value = unary()
    for (let op = peek(); op === "*" || op === "/" || op === "%"; op = peek()) {
      take()
      const right = unary()
      if ((op === "/" || op === "%") && right === 0) throw new CalculatorError("division by zero")
      value = op === "*" ? value * right : op === "/" ? value / right : value % right
    }
    return value
  }
  const sum = (): number => {
    let value = product()
    for (let op = peek(); op === "+" || op === "-"; op = peek()) {
      take()
      value = op === "+" ? value + product() : value - product()
    }
    return value
  }

  if (tokens.length === 0) throw new CalculatorError("empty expression")
  const value = sum()
  if (position < tokens.length) throw new CalculatorError(`unexpected "${tokens[position]}"`)
  if (!Number.isFinite(value)) throw new CalculatorError("the result is not a finite number")
  return value
}
