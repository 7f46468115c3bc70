/**
 * The plain Promise API: a drop-in replacement for `@hypercarrier/rarebit`'s
 * store, session, core and artifact-state functions, run by this package's
 * Effect implementation.
 *
 * @since 0.1.0
 */
export * from "./Evidence.js"
export * from "./Store.js"
