/**
 * The plain Promise API: a drop-in replacement for `@hypercarrier/rarebit`'s
 * store, session, core and artifact-state functions, run by this package's
 * Effect implementation, with their types under the reference's names.
 *
 * @since 0.1.0
 */
export * from "./Evidence.js"
export * from "./Store.js"
export type * from "./Types.js"
