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

const ctx = useOutside()
let dir: string
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-app-foreign-'))
})
after(() => fs.rmSync(dir, { recursive: true, force: true }))

test('a session querying through its own pg.Client makes explore undecided (exit 3), named in one line', async () => {
  const file = path.join(dir, 'own.race.mjs')
  fs.writeFileSync(
    file,
    `import { createRequire } from 'node:module'
const pg = createRequire(${JSON.stringify(path.join(ROOT, 'package.json'))})('pg')
export default {
  driver: 'pg',
  sessions: 2,
  setup: ['create table orders (id bigserial primary key, user_id text not null, status text not null)'],
  session: async (db, ctx) => {
    const c = new pg.Client({ connectionString: process.env.OWN_URL, options: '-c search_path=' + ctx.schema })
    await c.connect()
    const { rows } = await c.query("select count(*)::int as n from orders where user_id = $1 and status = 'pending'", [ctx.user])
    if (rows[0].n === 0) await c.query("insert into orders (user_id, status) values ($1, 'pending')", [ctx.user])
    await db.query('select 1')
    await c.end()
  },
  invariant: "select count(*) <= 1 from orders where status = 'pending'",
  expect: 'held',
}
`,
  )
  const r = await race(['explore', file, '--database-url', ctx.server.url, '--expect', 'held'], { env: { OWN_URL: ctx.server.url } })
  assert.equal(r.code, 3, r.stdout + r.stderr)
  oneCleanLine(r.stderr, /a connection race did not hand out queried the run's tables \(/)
  // Named by the session whose code opened it (its client port is one of the sockets that session connected).
  assert.match(r.stderr, /s1's own connection, pid \d+ queried orders/)
  assert.match(r.stderr, /s2's own connection, pid \d+ queried orders/)
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
