// Errors postgres.js 3.4.9 (and the mariadb connector) raise where nobody can catch them, which race has asked for and already recorded: the
// CLI (cli.ts) and the API (api.ts) ignore exactly these, and treat anything else as a bug.

/**
 * postgres.js 3.4.9 throws an uncatchable TypeError from connection.js nextWrite when a backend is
 * terminated while a query is in flight (upstream #1208, #1154). That session is already recorded as
 * lost, so exactly this error is ignored; anything else is a bug in race and ends the run with exit 3.
 */
export function isPostgresJsNextWriteBug(err: unknown): boolean {
  return (
    err instanceof TypeError &&
    /reading 'write'/.test(err.message) &&
    /nextWrite/.test(err.stack ?? '') &&
    /postgres[\\/]src[\\/]connection\.js/.test(err.stack ?? '')
  )
}

/**
 * postgres.js 3.4.9 fetches array types right after login in an async function whose promise nobody holds
 * (connection.js ReadyForQuery: `return fetchArrayTypes()`). When race ends a connection that is still in
 * that phase (its run failed while others were connecting, e.g. 53300), the fetch rejects with
 * CONNECTION_DESTROYED as an unhandled rejection. race asked for that ending, so exactly this is ignored.
 */
export function isPostgresJsDestroyedFetch(err: unknown): boolean {
  return (
    err instanceof Error &&
    (err as { code?: string }).code === 'CONNECTION_DESTROYED' &&
    /at Object\.terminate .*postgres[\\/]src[\\/]connection\.js/.test(err.stack ?? '')
  )
}

/**
 * The mariadb connector's destroy(), called while a statement is in flight, KILLs the thread from a connection of
 * its own and lets that KILL's failure escape its promise chain (connection.js destroy: `.finally(...)`, held by
 * nobody). When the thread is already gone (race's cleanup ended it a moment before: Ctrl-C, a lost session), the
 * KILL fails with 1094 ER_NO_SUCH_THREAD: the ending race asked for, so exactly that error number is ignored.
 * Read by error number (and the SQLSTATE the server sends with it), never by message text.
 */
export function isMariadbKillOfGoneThread(err: unknown): boolean {
  const e = err as { errno?: unknown; sqlState?: unknown } | undefined
  return e instanceof Error && e.errno === 1094 && e.sqlState === 'HY000'
}
