/**
 * What the audit can find, each kind documented once, on its member of
 * `FindingKind`, and how a finding is made.
 *
 * Every finding has a severity: `damage` (something is wrong, and some
 * reader or writer will stumble on it) or `notice` (worth knowing, harmless
 * by itself). Three kinds are the expected traces of a crash, which no
 * reader or writer is hurt by: a finding of those kinds is made as a
 * `crash_trace` and is a notice, marked `expectedAfterCrash`, unless the
 * audit is `strict`. A finding's `detail` is cut to `MAX_DETAIL_CHARS`
 * (`ReportFields`), so it stays small whatever it quotes.
 *
 * @since 0.1.0
 */
import { clipDetail } from "./ReportFields.js"

/**
 * What an audit finding is about.
 *
 * @category models
 * @since 0.1.0
 */
export type FindingKind =
  /** Damage: the file system refused to list a directory of the store. */
  | "directory_unreadable"
  /**
   * Damage: `jobs-v4` or `materializations-v4` is a symlink or not a
   * directory; the store refuses to write there, and the audit does not read
   * through it.
   */
  | "directory_unsafe"
  /** Damage: a sidecar path is a symlink or another non-regular file; the store never reads or writes it. */
  | "sidecar_not_regular"
  /** Damage: the file system refused to open or read a sidecar. */
  | "sidecar_unreadable"
  /** Crash trace: bytes after a sidecar's last newline (an append that crashed); readers ignore them. */
  | "torn_tail"
  /**
   * Crash trace: complete lines after a sidecar's last valid head (a writer
   * that appended a receipt and crashed before its head); reserving the job
   * again completes or redoes it.
   */
  | "uncommitted_tail"
  /**
   * Damage: a head-typed line that fails validation, or an unparsable line
   * mentioning `"rarebit_head"` (a line that starts with a BOM is not JSON);
   * current reads fail closed.
   */
  | "invalid_head"
  /**
   * Damage: a valid head whose byte range does not hold, by hash, a valid
   * summary receipt of the head's `sessionId`. Every head is checked, not
   * only the last.
   */
  | "head_range_invalid"
  /**
   * Damage: any other complete line that is not a valid v4 receipt
   * (unparsable, unknown type, fails its schema, over 48 KiB).
   */
  | "invalid_record"
  /**
   * Damage: a claim the file system refused to read, or that is not a
   * regular file, or is larger than any claim can be; it counts as in
   * flight until its lease has passed.
   */
  | "claim_unreadable"
  /**
   * Damage: a claim that is torn, not a claim object, names another job
   * than its file, has an unknown state, an active lease that can never
   * expire, or is settled without a receipt pointer.
   */
  | "claim_invalid"
  /**
   * Damage: a settled claim whose `receiptRef` does not verify (range, hash,
   * a valid receipt of the same job) against any sidecar that holds a
   * receipt of its job. Reserving that job fails.
   */
  | "claim_pointer_invalid"
  /**
   * Damage, store scope only: a settled claim whose job has no receipt in
   * any sidecar under the root. Claims do not name their Session, so this is
   * the precise form of "its sidecar is missing": the sidecar was deleted,
   * replaced or truncated. Reserving that job fails too.
   */
  | "claim_orphan"
  /** Notice: an active claim's lease ran out; the next reserve takes the job over. */
  | "claim_expired"
  /**
   * Damage: a commit lock whose owner is provably dead, that is older than
   * `staleAfterMs` (a commit holds it for milliseconds), or that cannot be
   * read as a lock at all (only a forced unlock removes it).
   */
  | "commit_lock_leftover"
  /** Notice: a young commit lock; a commit may be in progress. */
  | "commit_lock_held"
  /**
   * Crash trace once older than `staleAfterMs` (a notice while younger): a
   * private temp file of a lock or claim write, only garbage. A claim's temp
   * file names no Session, so only the store scope sees it.
   */
  | "temp_file_leftover"
  /**
   * Damage once older than `staleAfterMs` (a notice while younger): a lock
   * break file. It stops the lock it names from being broken again.
   */
  | "break_file_leftover"

/** `damage` makes an audit fail; a `notice` is worth knowing but not wrong. @category models @since 0.1.0 */
export type Severity = "damage" | "notice"

/**
 * What a finding is when made: a crash trace's severity depends on whether
 * the audit is `strict`.
 *
 * @category models
 * @since 0.1.0
 */
export type Verdict = Severity | "crash_trace"

/**
 * One thing the audit found. `offset` is an absolute byte offset in a
 * sidecar; `jobId` is set for claim findings. `expectedAfterCrash` marks
 * the traces a crash leaves (notices unless the audit is strict).
 *
 * @category models
 * @since 0.1.0
 */
export interface AuditFinding {
  readonly kind: FindingKind
  readonly severity: Severity
  readonly expectedAfterCrash: boolean
  readonly path: string
  readonly offset: number | null
  readonly jobId: string | null
  readonly detail: string
}

/**
 * A finding of `kind` about `path`, its detail cut to `MAX_DETAIL_CHARS`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const finding = (
  kind: FindingKind,
  verdict: Verdict,
  path: string,
  detail: string,
  extra: { readonly offset?: number; readonly jobId?: string } = {}
): AuditFinding => ({
  kind,
  severity: verdict === "crash_trace" ? "notice" : verdict,
  expectedAfterCrash: verdict === "crash_trace",
  path,
  offset: extra.offset ?? null,
  jobId: extra.jobId ?? null,
  detail: clipDetail(detail)
})

/**
 * The findings of a `strict` audit: the crash traces count as damage.
 *
 * @category constructors
 * @since 0.1.0
 */
export const judgedStrictly = (findings: ReadonlyArray<AuditFinding>): Array<AuditFinding> =>
  findings.map((item) => (item.expectedAfterCrash ? { ...item, severity: "damage" as const } : item))
