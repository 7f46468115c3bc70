/**
 * Types for the reference package's modules that have no subpath export (its
 * store and model modules) or whose subpath's types lack what we call (its
 * session module), imported by relative path from `test/support/Reference.ts`,
 * the stress kit (`stress/`) and the hostile-inputs driver, type-checked in
 * the same program. Deliberately loose: the tests compare what the
 * reference does, they do not rely on its declared shapes.
 */
declare module "*/rarebit-store.mjs" {
  export const DEFAULT_RAREBIT_ROOT: string
  export const DEFAULT_RAREBIT_SESSION_ROOT: string
  export const DEFAULT_RAREBIT_LEASE_MS: number
  export const RAREBIT_SIDECAR_PROTOCOL_VERSION: number
  export function rarebitMaterializationPath(sessionFile: unknown, options?: Record<string, unknown>): string
  export function readRarebitCurrent(input?: Record<string, unknown>): Promise<any>
  export function readRarebitHistory(input?: Record<string, unknown>): Promise<any>
  export function reserveRarebitJob(input?: Record<string, unknown>): Promise<any>
  export function settleRarebitJob(reservation: unknown, record: unknown): Promise<any>
  export function releaseRarebitJob(reservation: unknown): Promise<void>
}

declare module "*/rarebit-model.mjs" {
  export function extractRarebitSynthesisReceipt(
    response: unknown,
    options?: {
      readonly requestedModel?: unknown
      readonly startedAt?: string | null
      readonly completedAt?: string | null
      readonly durationMs?: number | null
      readonly outcome?: string
    }
  ): Record<string, unknown>
}

declare module "*/rarebit-session.mjs" {
  export function resolveRarebitSessionFile(reference: unknown, options?: Record<string, unknown>): Promise<string>
  export function readRarebitSession(
    reference: unknown,
    options?: Record<string, unknown>
  ): Promise<Record<string, unknown>>
}
