// A session that queries through a connection of its own (a `new pg.Client`) is never gated: explore saw one
// interleaving, HELD, exit 0 with --expect held, although the same code violates. race now asks the server for
// backends that are not its own and touch this run's tables, and the run is undecided (exit 3, one line). Another
// job's connection, in another process and on another schema's table of the same name, is not taken for one.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import { oneCleanLine, useOutside } from '../support/faults.js'
import { ROOT, race } from '../support/server.js'
import { MYSQL_URL, reachMysql } from '../innodb/support.js'

const ctx = useOutside()
let dir: string
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-app-foreign-'))
})
after(() => fs.rmSync(dir, { recursive: true, force: true }))

/**
 * A race module (in the test's folder) whose two sessions run `body` with `pg`, node-postgres, and OWN_URL, the
 * server's URL, at hand: a session that opens a client of its own. Its invariant is `invariant`, expected held.
 */
function ownClientRace(name: string, body: string, invariant: string): string {
  const file = path.join(dir, name)
  fs.writeFileSync(
    file,
    `import { createRequire } from 'node:module'
const pg = createRequire(${JSON.stringify(path.join(ROOT, 'package.json'))})('pg')
export default {
  driver: 'pg',
  sessions: 2,
  setup: ['create table orders (id bigserial primary key, user_id text not null, status text not null)'],
  session: async (db, ctx) => {
${body}
  },
  invariant: ${JSON.stringify(invariant)},
  expect: 'held',
}
`,
  )
  return file
}

test('a session querying through its own pg.Client makes explore undecided (exit 3), named in one line', async () => {
  const file = ownClientRace(
    'own.race.mjs',
    `    const c = new pg.Client({ connectionString: process.env.OWN_URL, options: '-c search_path=' + ctx.schema })
    await c.connect()
    const { rows } = await c.query("select count(*)::int as n from orders where user_id = $1 and status = 'pending'", [ctx.user])
    if (rows[0].n === 0) await c.query("insert into orders (user_id, status) values ($1, 'pending')", [ctx.user])
    await db.query('select 1')
    await c.end()`,
    "select count(*) <= 1 from orders where status = 'pending'",
  )
  const r = await race(['explore', file, '--database-url', ctx.server.url, '--expect', 'held'], { env: { OWN_URL: ctx.server.url } })
  assert.equal(r.code, 3, r.stdout + r.stderr)
  oneCleanLine(r.stderr, /a connection race did not hand out queried the run's tables \(/)
  // Named by the session whose code opened it (its client port is one of the sockets that session connected).
  assert.match(r.stderr, /s1's own connection, pid \d+ queried orders/)
  assert.match(r.stderr, /s2's own connection, pid \d+ queried orders/)
})

test("a session's own connection that comes and goes between two looks at the server is still seen: undecided, exit 3", async () => {
  // Opened, queried and closed in a few milliseconds: the server shows it neither at a look (every 250 ms) nor at
  // the end. race sees it start, in the session's own code, to the run's server.
  const file = ownClientRace(
    'brief.race.mjs',
    `    await db.query('select 1')
    const c = new pg.Client({ connectionString: process.env.OWN_URL, options: '-c search_path=' + ctx.schema })
    await c.connect()
    await c.query('select count(*)::int as n from orders')
    await c.end()`,
    'select true',
  )
  for (const cmd of ['run', 'explore']) {
    const r = await race([cmd, file, '--database-url', ctx.server.url], { env: { OWN_URL: ctx.server.url } })
    assert.equal(r.code, 3, `${cmd}: ${r.stdout}${r.stderr}`)
    oneCleanLine(r.stderr, /a connection race did not hand out reached the run's server \(/)
    for (const who of ['s1', 's2']) assert.match(r.stderr, new RegExp(`${who} connected to the server's port \\d+ itself`))
  }
})

test('another job on the same database (its own process, another schema, a table of the same name) is not taken for one', async () => {
  await ctx.sql.unsafe('create schema if not exists race_test_foreign_other')
  await ctx.sql.unsafe('create table if not exists race_test_foreign_other.orders (id int)')
  try {
    // Holds a lock on its own orders, and its last query names orders, for the whole run.
    const other = await ctx.sql.reserve()
    try {
      await other.unsafe("set application_name = 'another job'")
      await other.unsafe('begin')
      await other.unsafe('lock table race_test_foreign_other.orders in access share mode')
      await other.unsafe('select count(*) from race_test_foreign_other.orders')
      const r = await race(['explore', path.join(ROOT, 'examples', 'app', 'orders.race.mjs'), '--n', '2', '--database-url', ctx.server.url])
      assert.equal(r.code, 0, r.stdout + r.stderr)
      assert.doesNotMatch(r.stderr, /did not hand out/)
      await other.unsafe('rollback')
    } finally {
      other.release()
    }
  } finally {
    await ctx.sql.unsafe('drop schema race_test_foreign_other cascade')
  }
})

test("a session's own pg.Client over the server's Unix socket, querying the run's schema by name, makes the run undecided (exit 3): no TCP port to tell its process by", async (t) => {
  const [s] = await ctx.sql`select split_part(current_setting('unix_socket_directories'), ',', 1) as dir, current_setting('port') as port`
  const dir = String(s.dir).trim()
  if (!dir || !fs.existsSync(path.join(dir, `.s.PGSQL.${s.port}`))) return t.skip(`the server has no Unix socket this test can reach (${dir})`)
  const u = new URL(ctx.server.url)
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'race-app-foreign-unix-')), 'unix.race.mjs')
  fs.writeFileSync(
    file,
    `import { createRequire } from 'node:module'
const pg = createRequire(${JSON.stringify(path.join(ROOT, 'package.json'))})('pg')
// Left open (a module-level client, as an application keeps one): race asks the server at the end, while it is.
const kept = []
export default {
  driver: 'pg',
  sessions: 2,
  setup: ['create table orders (id bigserial primary key, user_id text not null, status text not null)'],
  session: async (db, ctx) => {
    const c = new pg.Client({ host: process.env.OWN_HOST, port: Number(process.env.OWN_PORT), user: process.env.OWN_USER, password: process.env.OWN_PASSWORD || undefined, database: process.env.OWN_DB })
    kept.push(c)
    await c.connect()
    const { rows } = await c.query(\`select count(*)::int as n from \${ctx.schema}.orders where user_id = $1 and status = 'pending'\`, [ctx.user])
    if (rows[0].n === 0) await db.query("insert into orders (user_id, status) values ($1, 'pending')", [ctx.user])
  },
  invariant: "select count(*) <= 1 from orders where status = 'pending'",
  expect: 'held',
}
`,
  )
  const r = await race(['run', file, '--database-url', ctx.server.url], {
    env: { OWN_HOST: dir, OWN_PORT: String(s.port), OWN_USER: decodeURIComponent(u.username), OWN_PASSWORD: decodeURIComponent(u.password), OWN_DB: u.pathname.slice(1) },
  })
  assert.equal(r.code, 3, r.stdout + r.stderr)
  oneCleanLine(r.stderr, /a connection race did not hand out queried the run's tables \(.*pid \d+ queried schema race_/)
  fs.rmSync(path.dirname(file), { recursive: true, force: true })
})

test('MariaDB: a session querying through its own mariadb connection to the run database makes the run undecided (exit 3), named by its session', async (t) => {
  const { conn: my, why } = await reachMysql()
  if (why) return t.skip(why)
  await my!.end()
  const file = path.join(dir, 'own-mariadb.race.mjs')
  fs.writeFileSync(
    file,
    `import { createRequire } from 'node:module'
const mariadb = createRequire(${JSON.stringify(path.join(ROOT, 'package.json'))})('mariadb')
const kept = []
export default {
  driver: 'mariadb',
  sessions: 2,
  setup: ['create table orders (id bigint auto_increment primary key, user_id varchar(64) not null, status varchar(16) not null) engine=innodb'],
  session: async (db, ctx) => {
    const u = new URL(process.env.OWN_URL)
    const c = await mariadb.createConnection({ host: u.hostname, port: Number(u.port || 3306), user: decodeURIComponent(u.username) || 'root', password: decodeURIComponent(u.password) || undefined, database: ctx.schema })
    kept.push(c)
    const rows = await c.query("select count(*) as n from orders where user_id = ? and status = 'pending'", [ctx.user])
    if (Number(rows[0].n) === 0) await db.query("insert into orders (user_id, status) values (?, 'pending')", [ctx.user])
  },
  invariant: "select count(*) <= 1 from orders where status = 'pending'",
  expect: 'held',
}
`,
  )
  const r = await race(['run', file, '--database-url', MYSQL_URL], { env: { OWN_URL: MYSQL_URL } })
  assert.equal(r.code, 3, r.stdout + r.stderr)
  oneCleanLine(r.stderr, /a connection race did not hand out queried the run's tables \(/)
  assert.match(r.stderr, /s1's own connection, pid \d+ used database race_/)
  assert.match(r.stderr, /s2's own connection, pid \d+ used database race_/)
})
