// SQLSTATE codes race meets, by name. Errors are read by code, never by message text.
const NAMES: Record<string, string> = {
  '23505': 'unique_violation',
  '23503': 'foreign_key_violation',
  '23514': 'check_violation',
  '23P01': 'exclusion_violation',
  '25001': 'active_sql_transaction',
  '25P02': 'in_failed_sql_transaction',
  '25P03': 'idle_in_transaction_session_timeout',
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
  '08006': 'connection_failure',
  '0A000': 'feature_not_supported',
}

export function conditionName(code: string | undefined): string | undefined {
  return code ? NAMES[code] : undefined
}

/** Errors by which PostgreSQL itself keeps an invariant: integrity (23), rollback (40), lock not available. */
export function isPrevention(code: string | undefined): boolean {
  return !!code && (code.startsWith('23') || code.startsWith('40') || code === '55P03')
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
