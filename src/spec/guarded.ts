// A global setup or teardown block of `race spec`, run on isolationtester's control connection inside a
// transaction race checks before committing (see guard.ts): what PQexec would return, or a refusal.
import { UsageError } from '../errors.js'
import { maintenanceOnly, transactionControl } from './files.js'
import { diff, fingerprintSql, locksSql, refusal, schemaLiteral } from './guard.js'
import type { PgConn, PgResult } from './pgconn.js'

async function rows(control: PgConn, sql: string): Promise<string[][]> {
  const r = await control.exec(sql)
  if (r?.status !== 'TUPLES_OK') throw new UsageError(`race could not check what a setup block changes: ${control.errorMessage.trim()}`)
  return r.rows.map((row) => row.map((v) => v ?? ''))
}

export async function guardedBlock(control: PgConn, sql: string, schema: string, where: string): Promise<PgResult | null> {
  const own = transactionControl(sql)
  if (own) {
    throw new UsageError(`${where} runs '${own.split(/\s+/).slice(0, 3).join(' ')}': race runs each setup and teardown block in a transaction of its own, to check that it changes nothing outside race's schema: leave transaction control out of it`)
  }
  await control.exec('BEGIN ISOLATION LEVEL REPEATABLE READ')
  const before = new Map((await rows(control, fingerprintSql(schemaLiteral(schema)))).map(([k, d]) => [k, d]))
  const r = await control.exec(sql)
  const message = control.errorMessage
  if (r?.status === 'FATAL_ERROR' || control.txStatus !== 'T') {
    await control.exec('ROLLBACK')
    if (r?.err?.C === '25001' && maintenanceOnly(sql)) return control.exec(sql)
    control.errorMessage = message
    return r
  }
  const after = new Map((await rows(control, fingerprintSql(schemaLiteral(schema)))).map(([k, d]) => [k, d]))
  const changes = [...diff(before, after), ...(await rows(control, locksSql(schemaLiteral(schema)))).map(([d]) => d)]
  if (changes.length) {
    await control.exec('ROLLBACK')
    throw new UsageError(refusal(where, schema, changes))
  }
  await control.exec('COMMIT')
  control.errorMessage = message
  return r
}
