// The machine's MariaDB (or the server MYSQL_URL names), for the InnoDB tests: they run when it answers and say
// so when they skip. Tests look only at their own databases (found by the mark race writes on each).
import mariadb, { type Connection } from 'mariadb'
import { performance } from 'node:perf_hooks'
import { after, before } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'

export const MYSQL_URL = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test'

/** A connection to the server, or why there is none (the tests that need it skip with that reason). */
export async function reachMysql(): Promise<{ conn?: Connection; why?: string }> {
  const u = new URL(MYSQL_URL)
  try {
    const conn = await mariadb.createConnection({
      host: u.hostname,
      port: Number(u.port || 3306),
      user: decodeURIComponent(u.username) || 'root',
      password: decodeURIComponent(u.password) || undefined,
      database: u.pathname.slice(1) || undefined,
      connectTimeout: 3000,
      bigIntAsNumber: true,
    })
    conn.on('error', () => {})
    return { conn }
  } catch (e) {
    return { why: `no MySQL/MariaDB answers at ${MYSQL_URL.replace(/:[^:@/]*@/, ':***@')} (${(e as Error).message.split('\n')[0]}): InnoDB tests skipped` }
  }
}

/**
 * A test file's connection to the server: made before its tests (or why there is none, said once on stdout: the tests
 * skip with it), ended after them.
 */
export function useMysql(): { conn?: Connection; why?: string } {
  const my: { conn?: Connection; why?: string } = {}
  before(async () => {
    Object.assign(my, await reachMysql())
    if (my.why) process.stdout.write(`# ${my.why}\n`)
  })
  after(async () => {
    await my.conn?.end()
  })
  return my
}

/** The databases race process `pid` created and left on the server (MariaDB: by the mark in their comment). */
export async function databasesOf(conn: Connection, pid: number): Promise<string[]> {
  const rows = (await conn.query(
    `select schema_name as name, schema_comment as mark from information_schema.schemata where schema_name like 'race\\_%' and schema_comment like 'race:{%'`,
  )) as { name: string; mark: string }[]
  return rows.filter((r) => (JSON.parse(r.mark.slice(5)) as { pid: number }).pid === pid).map((r) => r.name)
}

export async function databaseExists(conn: Connection, name: string): Promise<boolean> {
  const rows = (await conn.query(`select 1 from information_schema.schemata where schema_name = ?`, [name])) as unknown[]
  return rows.length > 0
}

/** Waits (bounded) until `f` is true, polling the server, never guessing from time. */
export async function until(f: () => Promise<boolean>, what: string, ms = 15_000): Promise<void> {
  const end = Date.now() + ms
  while (!(await f())) {
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`)
    await sleep(20)
  }
}

/**
 * Another reader of INNODB_TRX that keeps its cache from race: a read 0.1 s (and a little) after its last, which
 * refreshes the cache, then a read every 5 ms for 0.3 s, during which nobody's read can refresh it. `started`
 * resolves at its first read; `stop()` ends it and resolves to how many reads it made.
 */
export function busyTrxReader(conn: Connection): { started: Promise<void>; stop: () => Promise<number> } {
  let polling = true
  let busy: () => void = () => {}
  const started = new Promise<void>((resolve) => (busy = resolve))
  const reads = (async () => {
    let n = 0
    while (polling) {
      for (const until = performance.now() + 300; polling && performance.now() < until; n++) {
        await conn.query('select count(*) from information_schema.innodb_trx')
        busy()
        await sleep(5)
      }
      await sleep(101)
    }
    return n
  })()
  return {
    started,
    stop: () => {
      polling = false
      return reads
    },
  }
}
