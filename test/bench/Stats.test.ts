import { describe, expect, it } from "vitest"
import { medianInterval, quantile, runRounds } from "../../bench/Stats.js"

describe("bench Stats", () => {
  it("quantile interpolates between order statistics", () => {
    expect(quantile([4, 1, 3, 2], 0.5)).toBe(2.5)
    expect(quantile([10, 20, 30, 40, 50], 0.1)).toBe(14)
    expect(quantile([10, 20, 30, 40, 50], 0.9)).toBe(46)
    expect(quantile([], 0.5)).toBeNaN()
  })

  it("the median interval uses the widest order statistics that reach 95 % coverage", () => {
    // n = 5: even the extremes cover only 1 - 2/32 = 93.75 %, so no interval.
    expect(medianInterval([1, 2, 3, 4, 5])).toBeUndefined()
    // n = 6: the extremes cover 1 - 2/64 = 96.9 %.
    expect(medianInterval([6, 1, 5, 2, 4, 3])).toEqual({ low: 1, high: 6 })
    // n = 20: P(X ≤ 5) = 2.07 % ≤ 2.5 % but P(X ≤ 6) = 5.77 %: the 6th and 15th values.
    const twenty = Array.from({ length: 20 }, (_, index) => index + 1)
    expect(medianInterval(twenty)).toEqual({ low: 6, high: 15 })
  })

  it("stops once the interval of the median ratio is within the tolerance, after an even number of rounds", async () => {
    const orders: Array<boolean> = []
    // Seven rounds would do, but the eighth runs so that each side went first four times.
    const rounds = await runRounds({ minRounds: 7, maxRounds: 40, tolerance: 0.05 }, async (_, oursFirst) => {
      orders.push(oursFirst)
      return { ours: [2], theirs: [4] }
    })
    expect(rounds.ratio.rounds).toBe(8)
    expect(rounds.ratio.stoppedBy).toBe("converged")
    expect(rounds.ratio.median).toBe(0.5)
    expect(orders).toEqual([true, false, true, false, true, false, true, false])
  })

  it("runs to the round limit when the ratios stay spread, and says so", async () => {
    let index = 0
    const rounds = await runRounds({ minRounds: 6, maxRounds: 10, tolerance: 0.05 }, async () => {
      index++
      return { ours: [index % 2 === 0 ? 1 : 3], theirs: [2] }
    })
    expect(rounds.ratio.rounds).toBe(10)
    expect(rounds.ratio.stoppedBy).toBe("max rounds")
    expect(rounds.ratio.p10).toBeCloseTo(0.5)
    expect(rounds.ratio.p90).toBeCloseTo(1.5)
  })

  it("stops at the time budget with an even number of rounds", async () => {
    const rounds = await runRounds({ minRounds: 6, maxRounds: 100, tolerance: 0.01, budgetMs: 0 }, async (index) => ({
      ours: [1 + index],
      theirs: [1]
    }))
    expect(rounds.ratio.rounds).toBe(2)
    expect(rounds.ratio.stoppedBy).toBe("budget")
  })
})
