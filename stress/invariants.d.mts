/** Types of `invariants.mjs`, for the TypeScript tests that share the checker. */

export interface SidecarLine {
  readonly offset: number
  readonly length: number
  readonly hash: string
  readonly record: any
  readonly kind: "receipt" | "head" | "badHead" | "other"
  readonly empty: boolean
}

export interface ParsedSidecar {
  readonly size: number
  readonly lines: ReadonlyArray<SidecarLine>
  readonly tornTail: boolean
  readonly tornBytes: number
}

export interface FileBytes {
  readonly path: string
  readonly bytes: Uint8Array
}

export interface StoreFiles {
  readonly sidecars: ReadonlyArray<FileBytes>
  readonly claims: ReadonlyArray<FileBytes & { readonly jobId: string }>
  readonly locks: ReadonlyArray<FileBytes>
  readonly others?: ReadonlyArray<string>
  readonly jobSidecar?: ReadonlyMap<string, string>
  readonly expectedJobs?: Iterable<string>
  readonly tokenOf?: (record: any) => string | undefined
  readonly deadLocksArePending?: boolean
}

export interface StoreStats {
  readonly sidecars: number
  readonly receipts: number
  readonly heads: number
  readonly badHeadLines: number
  readonly tornTails: number
  readonly claims: number
  readonly settledClaims: number
  readonly activeClaims: number
  readonly tornClaims: number
  readonly jobsWithReceipts: number
  readonly duplicateReceiptJobs: number
  readonly orphanReceiptJobs: number
  readonly leftoverLocks: number
  readonly breakFiles: number
  readonly tempFiles: number
}

export interface StoreCheck {
  readonly violations: Array<string>
  readonly pending: Array<string>
  readonly stats: StoreStats
}

export declare const parseSidecar: (bytes: Uint8Array) => ParsedSidecar
export declare const checkStore: (input: StoreFiles) => StoreCheck
