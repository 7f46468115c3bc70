/**
 * Either kind of receipt a sidecar holds, and the shape a worker hands to
 * `settle`.
 *
 * A sidecar's receipts are Summary and Title receipts, told apart by
 * `type`. A worker builds its receipt before it knows (or without caring
 * about) the job id the store will record: `settle` always writes the
 * reservation's `jobId` over whatever the receipt carries, as the reference
 * does, so the input may leave it out.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { SummaryReceipt } from "./SummaryReceipt.js"
import { TitleReceipt } from "./TitleReceipt.js"

/**
 * A Summary or Title receipt, schema v4.
 *
 * @category schemas
 * @since 0.1.0
 */
export const Receipt = Schema.Union([SummaryReceipt, TitleReceipt])

/**
 * A Summary or Title receipt, discriminated by `type` and then `status`.
 *
 * @category models
 * @since 0.1.0
 */
export type Receipt = SummaryReceipt | TitleReceipt

/**
 * A receipt as a worker passes it to `settle`: `jobId` may be left out,
 * since the reservation's is written in its place.
 *
 * @category models
 * @since 0.1.0
 */
export type ReceiptInput<R extends Receipt = Receipt> = R extends unknown
  ? Omit<R, "jobId"> & { readonly jobId?: string | undefined }
  : never

/**
 * The receipt a settled input becomes: the receipt kind its `type` names.
 *
 * @category models
 * @since 0.1.0
 */
export type ReceiptOf<I extends { readonly type: Receipt["type"] }> = Extract<Receipt, { readonly type: I["type"] }>
