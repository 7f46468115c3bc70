/** Property-test case counts: the default suite uses `base`; `npm run fuzz` raises it through RAREBIT_FUZZ_RUNS. */
export const fuzzRuns = (base: number): number => Number(process.env.RAREBIT_FUZZ_RUNS ?? base)
