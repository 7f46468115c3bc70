import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Fails the run when dist/ is older than src/: tests run the build, they never make it.
    globalSetup: ["test/support/GlobalSetup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    maxWorkers: 2
  }
})
