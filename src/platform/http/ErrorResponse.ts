import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { errorBody } from "../Errors.js"

/** An error answer written outside HttpApi (guards, plain routes): the one body, with its status. */
export const errorResponse = (status: number, type: string, message: string, headers?: Record<string, string>) =>
  HttpServerResponse.unsafeJson(errorBody(type, message), { status, ...(headers ? { headers } : {}) })
