// Of the trials race judges unknown, those in which the code under test failed: an error it raised or caught that
// neither the server's concurrency control nor the scenario declares. That is a finding about the code (race explore
// reports it as its own outcome, with a line that replays it), not race's blindness. Everything else that leaves a
// trial unknown stays "could not decide": race gave up on a session (a step timeout), a connection was lost or the
// server went away, a query came after its function returned, race's own bound stopped a retry loop, the invariant
// could not be read, or the error is one the environment raises (the server shutting down, out of connections, a
// query cancelled, race's own confinement refusing a privilege). docs/verdicts.md has the table.
import { conditionName, errnoOf, isConcurrencyControl, sqlstateOf } from '../db/sqlstate.js'
import type { SessionReport } from '../engine/types.js'

type Seen = Pick<SessionReport, 'name' | 'outcome' | 'sqlstate'> & Pick<Partial<SessionReport>, 'thrown' | 'injected'>

/**
 * SQLSTATE classes the server raises for what happened around the code, not for what its SQL did: connection
 * exceptions (08), authorization (28), insufficient resources (53: too many connections, out of memory, disk full),
 * operator intervention (57: admin shutdown, cannot connect now, query cancelled), system errors (58), configuration
 * file errors (F0), internal errors (XX).
 */
const ENVIRONMENT_CLASSES = new Set(['08', '28', '53', '57', '58', 'F0', 'XX'])
/** And single codes of the same kind: no such database (3D000), a privilege race's confined role lacks (42501). */
const ENVIRONMENT_CODES = new Set(['3D000', '42501'])
/**
 * MySQL/MariaDB error numbers of the same kind: too many connections (1040), access denied (1044, 1045, 1142, 1227),
 * server shutdown (1053), aborted connection (1152, 1153), user limit (1226), query interrupted (1317), connection
 * killed (1927), server gone away or lost (2002, 2006, 2013).
 */
const ENVIRONMENT_ERRNOS = new Set([1040, 1044, 1045, 1053, 1142, 1152, 1153, 1226, 1227, 1317, 1927, 2002, 2006, 2013])

/** An error the environment raises (the server, its limits, race's confinement), not one the code's SQL earned. */
export function isEnvironmentError(code: string): boolean {
  const errno = errnoOf(code)
  if (errno !== undefined && ENVIRONMENT_ERRNOS.has(errno)) return true
  const state = sqlstateOf(code)
  return ENVIRONMENT_CODES.has(state) || ENVIRONMENT_CLASSES.has(state.slice(0, 2))
}

/** What a session's code did that race itself set apart as undecidable: a late query, or race's bound on a retry loop. */
const RACE_BLIND = /^(sent a query|met a query|retried without end|sent more than)/

/**
 * The code under test's failure in one trial, named session by session ("s1 42P01 undefined_table"), or undefined
 * when the trial is not one: no session failed so, or something race could not judge happened in it (a session timed
 * out or lost its connection, a late query, an error of the environment), which may have caused what failed.
 * `expected`: the SQLSTATEs the scenario declares as its prevention (run/judge.ts declaredCodes).
 */
export function codeFailure(sessions: readonly Seen[], expected: ReadonlySet<string>): string | undefined {
  const prevents = (code: string) => isConcurrencyControl(code) || expected.has(code) || expected.has(sqlstateOf(code))
  const blind = sessions.some(
    (s) =>
      s.outcome === 'timeout' ||
      (s.outcome === 'lost' && !s.injected?.some((x) => x.startsWith('lost@'))) ||
      (s.thrown !== undefined && RACE_BLIND.test(s.thrown)) ||
      (s.outcome === 'failed' && s.sqlstate && isEnvironmentError(s.sqlstate)),
  )
  if (blind) return undefined
  const named: string[] = []
  for (const s of sessions) {
    if (s.outcome !== 'failed') continue
    const code = s.sqlstate ?? undefined
    if (code && !prevents(code)) named.push(`${s.name} ${code}${conditionName(code) ? ` ${conditionName(code)}` : ''}`)
    else if (s.thrown?.startsWith('returned after')) named.push(`${s.name} committed outside any transaction (25P01 no_active_sql_transaction)`)
    else if (s.thrown !== undefined && !s.thrown.startsWith('caught ')) named.push(`${s.name} ${threw(s.thrown)}`)
  }
  return named.length ? named.join(', ') : undefined
}

/** A thrown error in the words the report uses (judge's labelOf says the same). */
function threw(thrown: string): string {
  if (thrown.startsWith('called ')) return thrown
  if (thrown.startsWith('uncaught exception ') || thrown.startsWith('unhandled rejection ')) return `left an ${thrown}`
  return `threw ${thrown}`
}
