import { assert, describe, it } from "@effect/vitest"
import { PlatformError } from "effect"
import { errnoOf } from "../../src/io/ErrnoCode.js"

const failure = (cause: unknown) =>
  PlatformError.systemError({
    _tag: "PermissionDenied",
    module: "FileSystem",
    method: "open",
    pathOrDescriptor: "/x",
    cause
  })

describe("errnoOf", () => {
  it("is the code of the Node error a PlatformError carries", () => {
    assert.strictEqual(
      errnoOf(failure(Object.assign(new Error("EACCES: permission denied"), { code: "EACCES" }))),
      "EACCES"
    )
  })

  it("is undefined without a cause, or a cause without a string code", () => {
    assert.isUndefined(errnoOf(failure(undefined)))
    assert.isUndefined(errnoOf(failure(new Error("no code"))))
    assert.isUndefined(errnoOf(failure({ code: 13 })))
    assert.isUndefined(errnoOf(failure("EACCES")))
  })
})
