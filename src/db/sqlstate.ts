// SQLSTATE codes race meets, by name. Errors are read by code, never by message text. A MySQL/MariaDB error
// is read by its SQLSTATE and its error number together, written 'SQLSTATE/errno' ('40001/1213'): MySQL gives
// many different errors the same SQLSTATE (HY000), so the number is what tells them apart.
const NAMES: Record<string, string> = {
  '23001': 'restrict_violation',
  '23502': 'not_null_violation',
  '23505': 'unique_violation',
  '23503': 'foreign_key_violation',
  '23514': 'check_violation',
  '23P01': 'exclusion_violation',
  '25001': 'active_sql_transaction',
  '25P02': 'in_failed_sql_transaction',
  '25P03': 'idle_in_transaction_session_timeout',
  '26000': 'invalid_sql_statement_name',
  '28000': 'invalid_authorization_specification',
  '28P01': 'invalid_password',
  '3D000': 'invalid_catalog_name',
  '3F000': 'invalid_schema_name',
  '40001': 'serialization_failure',
  '40P01': 'deadlock_detected',
  '42501': 'insufficient_privilege',
  '42601': 'syntax_error',
  '42P01': 'undefined_table',
  '42883': 'undefined_function',
  '53200': 'out_of_memory',
  '53300': 'too_many_connections',
  '55P03': 'lock_not_available',
  '57014': 'query_canceled',
  '57P01': 'admin_shutdown',
  '57P02': 'crash_shutdown',
  '57P03': 'cannot_connect_now',
  '57P05': 'idle_session_timeout',
  '08006': 'connection_failure',
  '08P01': 'protocol_violation',
  '0A000': 'feature_not_supported',
}

/**
 * A session's isolation level as the driver reports it when it asked the server and got no answer in time (MySQL:
 * no fresh copy of INNODB_TRX): the session's transaction had a level, unknown. The judge never compares such a
 * run in silence (judge.unreadLevels).
 */
export const UNREAD_LEVEL = '?'

/** MySQL/MariaDB error numbers race meets, by their manual's names. */
const MYSQL: Record<string, string> = {
  '1020': 'ER_CHECKREAD',
  '1045': 'ER_ACCESS_DENIED_ERROR',
  '1048': 'ER_BAD_NULL_ERROR',
  '1049': 'ER_BAD_DB_ERROR',
  '1062': 'ER_DUP_ENTRY',
  '1064': 'ER_PARSE_ERROR',
  '1094': 'ER_NO_SUCH_THREAD',
  '1142': 'ER_TABLEACCESS_DENIED_ERROR',
  '1044': 'ER_DBACCESS_DENIED_ERROR',
  '1146': 'ER_NO_SUCH_TABLE',
  '1193': 'ER_UNKNOWN_SYSTEM_VARIABLE',
  '1205': 'ER_LOCK_WAIT_TIMEOUT',
  '1213': 'ER_LOCK_DEADLOCK',
  '1226': 'ER_USER_LIMIT_REACHED',
  '1227': 'ER_SPECIFIC_ACCESS_DENIED_ERROR',
  '1317': 'ER_QUERY_INTERRUPTED',
  '1040': 'ER_CON_COUNT_ERROR',
  '3058': 'ER_USER_LOCK_DEADLOCK',
  '3572': 'ER_LOCK_NOWAIT',
  '4025': 'ER_CONSTRAINT_FAILED',
}

/** A server's error code: a SQLSTATE, or MySQL's 'SQLSTATE/errno'. */
export function isServerError(code: unknown): code is string {
  return typeof code === 'string' && /^[0-9A-Z]{5}(\/\d+)?$/.test(code)
}

/** The SQLSTATE of a code ('40001/1213' -> '40001'). */
export function sqlstateOf(code: string): string {
  const slash = code.indexOf('/')
  return slash < 0 ? code : code.slice(0, slash)
}

/** The MySQL error number of a code, if it has one. */
export function errnoOf(code: string | undefined): number | undefined {
  const slash = code?.indexOf('/') ?? -1
  return slash < 0 ? undefined : Number(code!.slice(slash + 1))
}

export function conditionName(code: string | undefined): string | undefined {
  if (!code) return undefined
  const errno = errnoOf(code)
  return errno === undefined ? NAMES[code] : MYSQL[String(errno)]
}

/**
 * Errors by which the server's concurrency control keeps an invariant, whatever the SQL says: rollback (40:
 * serialization failure, deadlock), lock not available (PostgreSQL 55P03; MySQL's lock wait timeout 1205 and
 * NOWAIT 3572), and MariaDB's "record has changed since last read" (1020, innodb_snapshot_isolation). No typo in a
 * statement raises them. They count as prevention without being declared (docs/verdicts.md).
 */
export function isConcurrencyControl(code: string | undefined): boolean {
  if (!code) return false
  const errno = errnoOf(code)
  if (errno !== undefined && (errno === 1205 || errno === 3572 || errno === 1020)) return true
  return code.startsWith('40') || code === '55P03'
}

/**
 * An integrity constraint violation (class 23: unique, not null, check, foreign key, exclusion; MySQL's 23000/*).
 * It keeps an invariant only where a scenario declares it does (its documented outcomes or a spec's `prevented by`
 * line): the same codes come from an insert that omits a NOT NULL column or a CHECK a typo breaks, where every
 * session fails and nothing was ever tested (docs/verdicts.md).
 */
export function isIntegrityViolation(code: string | undefined): boolean {
  return !!code && code.startsWith('23')
}

/** The connection is gone: the server ended it, or the socket broke. */
export function isConnectionLoss(err: unknown): boolean {
  const code = (err as { code?: string })?.code
  return (
    code === 'CONNECTION_CLOSED' ||
    code === 'CONNECTION_ENDED' ||
    code === 'CONNECTION_DESTROYED' ||
    code === 'ECONNRESET' ||
    code === 'EPIPE' ||
    code === 'ECONNREFUSED' ||
    code === '57P01' ||
    code === '57P02' ||
    code === '57P03' ||
    code === '08006'
  )
}
