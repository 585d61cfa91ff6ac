// A global setup or teardown block of `race spec`, run on isolationtester's control connection inside a
// transaction race checks before committing (see guard.ts): what PQexec would return, or a refusal.
// Each block starts from the session state race gave the connection: what a block SETs (search_path, a role,
// default_transaction_read_only...) ends with it (restoreSql), so a later block, its guard and the unguarded
// maintenance statements below resolve names in race's schema.
import { UsageError } from '../errors.js'
import { statements } from '../lex.js'
import { maintenanceOnly, maintenanceTargets, outsideReach, transactionControl } from '../specfile/files.js'
import { diff, fingerprintSql, GUARD_PATH, locksSql, refusal, restoreSql, schemaLiteral, tempSql, words } from '../specfile/guard.js'
import type { PgConn, PgResult } from './pgconn.js'

async function rows(control: PgConn, sql: string): Promise<string[][]> {
  const r = await control.exec(sql)
  if (r?.status !== 'TUPLES_OK') throw new UsageError(`race could not check what a setup block changes: ${control.errorMessage.trim()}`)
  return r.rows.map((row) => row.map((v) => v ?? ''))
}

/** Back to race's session state (startup parameters, login role; application_name as isolationtester set it). */
async function restore(control: PgConn, appName: string): Promise<void> {
  const r = await control.exec(`${restoreSql()}; select pg_catalog.set_config('application_name', ${schemaLiteral(appName)}, false)`)
  if (r?.status !== 'TUPLES_OK') throw new UsageError(`race could not reset the control connection after a setup block: ${control.errorMessage.trim()}`)
}

/**
 * What a block of maintenance statements (which PostgreSQL runs only outside a transaction, so outside the guard)
 * would touch outside the schema, in words; checked before it runs, with the names resolved as the statements
 * will resolve them (the same connection, race's search_path).
 */
async function maintenanceOutside(control: PgConn, sql: string, schema: string): Promise<string[]> {
  const out: string[] = []
  for (const st of statements(sql)) {
    const t = maintenanceTargets(st)
    if ('all' in t) {
      out.push(t.all)
      continue
    }
    for (const name of t.names) {
      const found = await rows(
        control,
        // Under the spec's search_path (the name resolves as the statement's will): every function and operator
        // of race's own named in pg_catalog.
        `select pg_catalog.format('%s %I.%I', case when c.relkind OPERATOR(pg_catalog.=) any ('{i,I}'::"char"[]) then 'index' else 'table' end, n.nspname, c.relname), n.nspname OPERATOR(pg_catalog.=) ${schemaLiteral(schema)}::name
           from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid OPERATOR(pg_catalog.=) c.relnamespace where c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(${schemaLiteral(name)})::oid`,
      )
      if (found.length && found[0][1] !== 't') out.push(`${st.trim().split(/\s+/)[0].toLowerCase()} on ${found[0][0]}`)
    }
  }
  return out
}

export async function guardedBlock(control: PgConn, sql: string, schema: string, where: string): Promise<PgResult | null> {
  const own = transactionControl(sql)
  if (own) {
    throw new UsageError(`${where} runs '${own.split(/\s+/).slice(0, 3).join(' ')}': race runs each setup and teardown block in a transaction of its own, to check that it changes nothing outside race's schema: leave transaction control out of it`)
  }
  const reach = outsideReach(sql)
  if (reach) throw new UsageError(`${where} ${reach}: a spec may change only what it creates in race's schema ${schema}, and nothing outside the database (see docs/spec-setup-rules.md); nothing was changed`)
  const [[appName, path]] = await rows(control, `select pg_catalog.current_setting('application_name'), pg_catalog.current_setting('search_path')`)
  let result: PgResult | null
  try {
    result = await checked(control, sql, schema, where, path)
  } catch (e) {
    // The refusal (or the failed check) is what the user sees; the reset is tried, and the run ends anyway.
    if (control.txStatus !== 'I') await control.exec('ROLLBACK').catch(() => null)
    await restore(control, appName).catch(() => {})
    throw e
  }
  const message = control.errorMessage
  await restore(control, appName)
  control.errorMessage = message
  return result
}

/** Sets the search_path for the rest of the block's transaction (`path`: the spec's, or race's own GUARD_PATH). */
async function searchPath(control: PgConn, path: string): Promise<void> {
  await rows(control, `select pg_catalog.set_config('search_path', ${schemaLiteral(path)}, true)`)
}

/**
 * The block between two fingerprints, in one transaction. race's own reads run under GUARD_PATH (pg_catalog only: a
 * function or operator an earlier block made in the run's schema is never the guard's), the block under `path`.
 */
async function checked(control: PgConn, sql: string, schema: string, where: string, path: string): Promise<PgResult | null> {
  await control.exec('BEGIN ISOLATION LEVEL REPEATABLE READ')
  await searchPath(control, GUARD_PATH)
  const before = new Map((await rows(control, fingerprintSql(schemaLiteral(schema)))).map(([k, d]) => [k, d]))
  await searchPath(control, path)
  const r = await control.exec(sql)
  const message = control.errorMessage
  if (r?.status === 'FATAL_ERROR' || control.txStatus !== 'T') {
    await control.exec('ROLLBACK')
    if (r?.err?.C === '25001' && maintenanceOnly(sql)) {
      // Outside a transaction nothing can be taken back: what the statements name is checked first.
      const outside = await maintenanceOutside(control, sql, schema)
      if (outside.length) throw new UsageError(refusal(where, schema, outside))
      return control.exec(sql)
    }
    control.errorMessage = message
    return r
  }
  await searchPath(control, GUARD_PATH)
  const after = new Map((await rows(control, fingerprintSql(schemaLiteral(schema)))).map(([k, d]) => [k, d]))
  const changes = [...diff(before, after), ...(await rows(control, locksSql(schemaLiteral(schema)))).map(([d]) => d), ...(await rows(control, tempSql())).map(([d]) => d)]
  if (changes.length) {
    const said = await rows(control, `select ${words('x')} from unnest(array[${changes.slice(0, 3).map(schemaLiteral).join(', ')}]::text[]) x`)
    await control.exec('ROLLBACK')
    throw new UsageError(refusal(where, schema, [...said.map(([d]) => d), ...changes.slice(3)]))
  }
  await control.exec('COMMIT')
  control.errorMessage = message
  return r
}
