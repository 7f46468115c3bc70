/** Types of `receipts.mjs`, for the TypeScript tests that share its receipt builders. */

/** Who a receipt says derived it, and the text it carries (`summary` or `title`). */
export interface ReceiptSource {
  readonly model: { readonly provider: string; readonly id: string }
  /** `modelProvenance.source` */
  readonly source: string
  readonly text: string
}

export interface Lease {
  readonly impl: "ours" | "reference"
  readonly worker: number
  readonly token: string
}

export declare const summaryReceipt: (
  branch: ReadonlyArray<Record<string, unknown>>,
  sessionId: string,
  source: ReceiptSource
) => Record<string, unknown>
export declare const titleReceipt: (
  branch: ReadonlyArray<Record<string, unknown>>,
  sessionId: string,
  source: ReceiptSource
) => Record<string, unknown>
export declare const leaseOf: (record: unknown) => Lease | undefined
export declare const receiptFor: (
  sessionFile: string,
  sessionRoot: string,
  kind: "summary" | "title",
  signature: string
) => Promise<Record<string, unknown> | undefined>
