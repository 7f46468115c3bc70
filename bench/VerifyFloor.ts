/**
 * The floor the `verify` row is measured against: a plain script that walks
 * a rarebit root and reads every file once, parsing nothing. No scan that
 * looks at every byte can do less I/O.
 *
 * Usage: VerifyFloor.js <rarebitRoot>; prints `{ files, bytes }`.
 *
 * @since 0.1.0
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"

let files = 0
let bytes = 0
const walk = (directory: string): void => {
  for (const entry of readdirSync(directory, { withFileTypes: true })) {
    const path = join(directory, entry.name)
    if (entry.isDirectory()) walk(path)
    else if (entry.isFile()) {
      bytes += readFileSync(path).byteLength
      files++
    }
  }
}
walk(process.argv[2])
process.stdout.write(`${JSON.stringify({ files, bytes })}\n`)
