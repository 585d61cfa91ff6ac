// The run user on MariaDB/MySQL (db/mysql.ts): a race's own SQL (setup, sessions, invariant) runs as an account race
// makes for the run, granted only on the run's database, and dropped after it (by the next run after a SIGKILL, by
// identity); where the account may not make one, one line says so. And a setup statement that fails is the module's
// error in one line. Against the machine's MariaDB (or MYSQL_URL); skipped, saying why, when none answers. Each test
// looks only at its own objects (a database and accounts named with random hex, the run's own database and user).
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import { BIN, race } from '../support/server.js'
import type { Connection } from 'mariadb'
import { MYSQL_URL, databaseExists, databasesOf, reachMysql, until } from './support.js'

const my: { conn?: Connection; why?: string } = {}
let dir = ''
/** A database outside race's, made for this file: a run must not be able to write there. */
const OTHER = `other_${randomBytes(5).toString('hex')}`

before(async () => {
  Object.assign(my, await reachMysql())
  if (my.why) process.stdout.write(`# ${my.why}\n`)
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-run-user-'))
  if (my.conn) await sql(`create database \`${OTHER}\``, `create table \`${OTHER}\`.t (x int)`)
})
after(async () => {
  if (my.conn) await sql(`drop database if exists \`${OTHER}\``)
  await my.conn?.end()
  fs.rmSync(dir, { recursive: true, force: true })
})

/** Runs statements one by one on the test's connection. */
async function sql(...stmts: string[]): Promise<void> {
  for (const s of stmts) await my.conn!.query(s)
}

/** Writes a race module into the test's directory; its sessions record the account they run as in `who`. */
function module(name: string, body: string): { file: string; who: string } {
  const file = path.join(dir, `${name}.race.mjs`)
  const who = path.join(dir, `${name}.who`)
  fs.writeFileSync(file, `import fs from 'node:fs'\nconst who = ${JSON.stringify(who)}\nexport default {\n  driver: 'mariadb',\n${body}\n}\n`)
  return { file, who }
}

/** The accounts a run's sessions said they ran as (CURRENT_USER(), 'name@host'). */
function accounts(who: string): string[] {
  return fs.existsSync(who) ? [...new Set(fs.readFileSync(who, 'utf8').split('\n').filter(Boolean))] : []
}

async function userExists(name: string, host: string): Promise<boolean> {
  const rows = (await my.conn!.query('select 1 from mysql.user where user = ? and host = ?', [name, host])) as unknown[]
  return rows.length > 0
}

const SESSION_WRITES_OUTSIDE = `  sessions: 2,
  setup: ['create table orders (id int auto_increment primary key, user_id varchar(64) not null)'],
  session: async (db, ctx) => {
    const [r] = await db.query('select current_user() as u')
    fs.appendFileSync(who, r.u + '\\n')
    await db.query('insert into \`${OTHER}\`.t values (?)', [ctx.index])
    await db.query('insert into orders (user_id) values (?)', [ctx.user])
  },
  invariant: 'select count(*) <= 2 as held from orders',
  expect: 'held',`

test("MariaDB: a session writing into another database is refused (42000/1142) as the run's own user: the trial is not HELD, nothing was written there, and the user is gone after the run", async (t) => {
  if (my.why) return t.skip(my.why)
  const { file, who } = module('outside-session', SESSION_WRITES_OUTSIDE)
  const r = await race(['run', file, '--no-color'], { url: MYSQL_URL })
  assert.equal(r.code, 3, r.stdout + r.stderr)
  assert.match(r.stdout, /^verdict\s+unknown \(s1 failed with 42000\/1142/m, r.stdout)
  assert.match(r.stderr, /42000\/1142 ER_TABLEACCESS_DENIED_ERROR/)
  const [row] = (await my.conn!.query(`select count(*) as n from \`${OTHER}\`.t`)) as { n: number }[]
  assert.equal(Number(row.n), 0, 'nothing was written outside the run database')
  const users = accounts(who)
  assert.equal(users.length, 1, `the sessions ran as one account: ${users.join(', ')}`)
  const [name, host] = users[0].split('@')
  assert.match(name, /^race_u_[0-9a-f]{12}$/, "the sessions ran as the run's own user, not race's account")
  assert.equal(await userExists(name, host), false, "the run's user was dropped with its database")
  assert.deepEqual(await databasesOf(my.conn!, r.pid), [])
})

test('MariaDB: a setup statement writing into another database is refused in one line naming it (exit 2), nothing made there', async (t) => {
  if (my.why) return t.skip(my.why)
  const { file } = module(
    'outside-setup',
    `  sessions: 2,
  setup: ['create table orders (id int)', 'create table \`${OTHER}\`.planted (x int)'],
  session: async (db) => { await db.query('select 1') },
  invariant: 'select 1 as held',
  expect: 'held',`,
  )
  const r = await race(['run', file, '--no-color'], { url: MYSQL_URL })
  assert.equal(r.code, 2, r.stdout + r.stderr)
  assert.match(r.stderr, /^race: .*outside-setup\.race\.mjs: a setup statement was refused by the server: .*\(42000\/1142 ER_TABLEACCESS_DENIED_ERROR\), in: create table `other_[0-9a-f]+`\.planted \(x int\): .*\n$/)
  const made = (await my.conn!.query(`select 1 from information_schema.tables where table_schema = ? and table_name = 'planted'`, [OTHER])) as unknown[]
  assert.equal(made.length, 0)
  assert.deepEqual(await databasesOf(my.conn!, r.pid), [])
})

test('MariaDB: a setup typo is the module\'s error in one line (its statement, 42000/1064), exit 3 as on PostgreSQL, not an internal error', async (t) => {
  if (my.why) return t.skip(my.why)
  const { file } = module(
    'setup-typo',
    `  sessions: 2,
  setup: ['create tabel orders (id int)'],
  session: async (db) => { await db.query('select 1') },
  invariant: 'select 1 as held',
  expect: 'held',`,
  )
  const r = await race(['run', file, '--no-color'], { url: MYSQL_URL })
  assert.equal(r.code, 3, r.stdout + r.stderr)
  assert.doesNotMatch(r.stderr, /internal error|please report/)
  assert.match(r.stderr, /^race: .*setup-typo\.race\.mjs: a setup statement failed: .*\(42000\/1064 ER_PARSE_ERROR\), in: create tabel orders \(id int\)\n$/)
  assert.deepEqual(await databasesOf(my.conn!, r.pid), [])
})

test("MariaDB: a SIGKILLed run's user is dropped by the next run with its database; a user a forged mark names is not", async (t) => {
  if (my.why) return t.skip(my.why)
  const { file, who } = module(
    'killed',
    `  sessions: 2,
  setup: ['create table orders (id int)'],
  session: async (db) => {
    const [r] = await db.query('select current_user() as u')
    fs.appendFileSync(who, r.u + '\\n')
    await db.query('select sleep(60)')
  },
  invariant: 'select 1 as held',
  expect: 'held',`,
  )
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', DATABASE_URL: MYSQL_URL }
  const child = spawn(process.execPath, [BIN, 'run', file, '--run-timeout', '90s', '--step-timeout', '90s'], { env, stdio: 'ignore' })
  const done = new Promise<void>((r) => child.on('close', () => r()))
  let db = ''
  let mark: { thread: number; runUser?: string; runHost?: string } = { thread: 0 }
  // A decoy: an account shaped like a run user, granted on a database of its own, named by a forged mark on a dead
  // run's database of race's account. The reaper drops that database, never the decoy.
  const decoy = `race_u_${randomBytes(6).toString('hex')}`
  const forged = `race_forged_${randomBytes(4).toString('hex')}`
  try {
    await until(async () => accounts(who).length > 0, 'the run to start its sessions', 30_000)
    ;[db] = await databasesOf(my.conn!, child.pid!)
    assert.ok(db, 'the run has its database')
    mark = JSON.parse(((await my.conn!.query('select schema_comment as c from information_schema.schemata where schema_name = ?', [db])) as { c: string }[])[0].c.slice(5))
    assert.equal(`${mark.runUser}@${mark.runHost}`, accounts(who)[0], 'the mark names the user the sessions run as')
    const host = mark.runHost!
    const fake = { ...mark, pid: process.pid, thread: 2 ** 31 - 1, runUser: decoy }
    await sql(`create user '${decoy}'@'${host}'`, `grant select on \`${OTHER}\`.* to '${decoy}'@'${host}'`)
    await my.conn!.query(`create database \`${forged}\` comment ?`, ['race:' + JSON.stringify(fake)])
    child.kill('SIGKILL')
    await done
    await until(async () => ((await my.conn!.query('select 1 from information_schema.processlist where id = ?', [mark.thread])) as unknown[]).length === 0, "the killed run's control thread to end")
    assert.ok(await userExists(mark.runUser!, host), 'SIGKILL left the run user behind')
    const next = module('next', `  sessions: 2,\n  setup: ['create table t (x int)'],\n  session: async (db) => { await db.query('insert into t values (1)') },\n  invariant: 'select count(*) = 2 as held from t',\n  expect: 'held',`)
    const r = await race(['run', next.file, '--no-color'], { url: MYSQL_URL })
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assert.ok(!(await databaseExists(my.conn!, db)), "the next run reaped the killed run's database")
    assert.equal(await userExists(mark.runUser!, host), false, "the next run dropped the killed run's user")
    assert.ok(!(await databaseExists(my.conn!, forged)), 'the forged mark\'s database (a dead run of this account) was reaped')
    assert.ok(await userExists(decoy, host), 'the decoy a forged mark names was not dropped')
  } finally {
    child.kill('SIGKILL')
    await my.conn!.query(`drop database if exists \`${forged}\``)
    if (mark.runHost) {
      await my.conn!.query(`drop user if exists '${decoy}'@'${mark.runHost}'`)
      if (mark.runUser && /^race_u_[0-9a-f]{12}$/.test(mark.runUser)) await my.conn!.query(`drop user if exists '${mark.runUser}'@'${mark.runHost}'`)
    }
    if (db) await my.conn!.query(`drop database if exists \`${db}\``)
  }
})

test('MariaDB: an account that may not create users runs the race as itself, and says so in one line', async (t) => {
  if (my.why) return t.skip(my.why)
  const name = `race_lim_${randomBytes(5).toString('hex')}`
  const password = randomBytes(12).toString('hex')
  const [{ client }] = (await my.conn!.query('select user() as client')) as { client: string }[]
  const host = client.slice(client.lastIndexOf('@') + 1)
  await sql(`create user '${name}'@'${host}' identified by '${password}'`, `grant all privileges on \`race\\_%\`.* to '${name}'@'${host}'`, `grant process on *.* to '${name}'@'${host}'`)
  try {
    const u = new URL(MYSQL_URL)
    u.username = name
    u.password = password
    u.pathname = '/'
    const { file, who } = module('limited', `  sessions: 2,\n  setup: ['create table t (x int)'],\n  session: async (db) => {\n    const [r] = await db.query('select current_user() as u')\n    fs.appendFileSync(who, r.u + '\\n')\n    await db.query('insert into t values (1)')\n  },\n  invariant: 'select count(*) = 2 as held from t',\n  expect: 'held',`)
    const r = await race(['run', file, '--no-color'], { url: u.toString() })
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assert.match(r.stderr, /^race: this MySQL account may not create the run user .*\(42000\/1227 ER_SPECIFIC_ACCESS_DENIED_ERROR.*\): the run's SQL runs as race_lim_[0-9a-f]+@.*, not confined to the run's database\n$/)
    assert.deepEqual(accounts(who), [`${name}@${host}`])
  } finally {
    await my.conn!.query(`drop user if exists '${name}'@'${host}'`)
  }
})
