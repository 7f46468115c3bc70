/**
 * Hostile files for tests, made the same way in both worlds: a FIFO, a Unix
 * socket, and `/dev/zero`, `/dev/urandom`, `/dev/null`.
 *
 * On the real disk a FIFO is made with `mkfifo(1)`, a socket by a listening
 * server (closed with the scope), and a device is a symlink to the real one
 * in `/dev`. In the memory model the FIFO and the socket are its own special
 * nodes, and a device is a symlink to a device node the model makes at
 * `/dev/<name>`, so the same path is a symlink to a character device in both
 * worlds.
 */
import { Effect, FileSystem, type Scope } from "effect"
import { execFileSync } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import * as Net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { MemoryFileSystemShape } from "../../src/testing/MemoryFileSystem.js"

/** What `makeSpecial` can make. */
export type SpecialKind = "fifo" | "socket" | "zero" | "urandom" | "null"

export const specialKinds: ReadonlyArray<SpecialKind> = ["fifo", "socket", "zero", "urandom", "null"]

/** The `File.Info.type` a path made by `makeSpecial` has through `stat`. */
export const statTypeOf = (kind: SpecialKind): FileSystem.File.Type =>
  kind === "fifo" ? "FIFO" : kind === "socket" ? "Socket" : "CharacterDevice"

const isMemory = (fs: FileSystem.FileSystem): fs is MemoryFileSystemShape =>
  typeof (fs as Partial<MemoryFileSystemShape>).makeFifo === "function"

/** The memory model's `/dev/<name>`, made on first use. */
const memoryDevice = (fs: MemoryFileSystemShape, name: "zero" | "urandom" | "null") =>
  Effect.gen(function*() {
    const device = `/dev/${name}`
    if (yield* fs.exists(device)) return device
    yield* fs.makeDirectory("/dev", { recursive: true })
    yield* fs.makeCharacterDevice(device, name)
    return device
  })

/**
 * Makes a `kind` special file at `path` (whose parent must exist). A FIFO or
 * socket is made right there; a device is a symlink to it.
 */
export const makeSpecial = (path: string, kind: SpecialKind) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    if (isMemory(fs)) {
      if (kind === "fifo") return yield* Effect.orDie(fs.makeFifo(path))
      if (kind === "socket") return yield* Effect.orDie(fs.makeSocket(path))
      return yield* Effect.orDie(Effect.flatMap(memoryDevice(fs, kind), (device) => fs.symlink(device, path)))
    }
    if (kind === "fifo") return void execFileSync("mkfifo", [path])
    if (kind === "socket") {
      // A socket path is at most 107 bytes (longer ones are truncated or refused), so
      // the socket is bound in a short temporary directory and renamed into place.
      const directory = mkdtempSync(join(tmpdir(), "rb-"))
      const server = Net.createServer()
      yield* Effect.acquireRelease(
        Effect.callback<void>((resume) => {
          server.once("error", (error) => resume(Effect.die(error)))
          server.listen(join(directory, "s"), () => resume(Effect.void))
        }),
        () =>
          Effect.callback<void>((resume) =>
            void server.close(() => {
              rmSync(directory, { recursive: true, force: true })
              resume(Effect.void)
            })
          )
      )
      return yield* Effect.orDie(fs.rename(join(directory, "s"), path))
    }
    return yield* Effect.orDie(fs.symlink(`/dev/${kind}`, path))
  })

/** Makes `kind` at `target` and a symlink to it at `path`. */
export const makeSymlinkToSpecial = (path: string, target: string, kind: SpecialKind) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    yield* makeSpecial(target, kind)
    yield* Effect.orDie(fs.symlink(target, path))
  })

export type SpecialServices = FileSystem.FileSystem | Scope.Scope
