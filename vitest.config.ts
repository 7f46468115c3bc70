import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Fails the run when dist/ is older than src/, and prints the run's reports at the end.
    globalSetup: ["test/support/GlobalSetup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    maxWorkers: 2
  }
})
