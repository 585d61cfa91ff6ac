// ctx.pg is node-postgres to the code under test, callbacks included: Client#connect calls back (null, client) and
// its promise gives the client, query calls back (null, result), end calls back, a handle's 'connect'
// listeners are called; Pool#connect calls back (undefined, client, release) with pg-pool's 'connect', 'acquire' and
// 'release' events, its query calls back, its end calls back; ctx.pool's connect calls back later, as pg-pool's does.
// Each shape is checked inside a session (a wrong one throws, and the run is not held). A listener of the code's own
// that throws (a notice listener, called from the connection's socket) is the session's failure, never race's
// "internal error". Against the test server (DATABASE_URL, else embedded).
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import { leftBy, useOutside } from '../support/faults.js'
import { race } from '../support/server.js'

const ctx = useOutside()
let dir: string
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-app-pg-api-'))
})
after(() => fs.rmSync(dir, { recursive: true, force: true }))

function moduleFile(name: string, session: string, rows: number): string {
  const file = path.join(dir, name)
  fs.writeFileSync(
    file,
    `const check = (ok, what) => { if (!ok) throw new Error('not node-postgres: ' + what) }
export default {
  driver: 'pg',
  sessions: 2,
  setup: ['create table t (shape text not null)'],
  session: ${session},
  invariant: 'select count(*) = ${rows} * 2 from t',
  expect: 'held',
}
`,
  )
  return file
}

async function held(file: string): Promise<void> {
  const r = await race(['run', file, '--database-url', ctx.server.url])
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.doesNotMatch(r.stdout + r.stderr, /not node-postgres/)
  assert.deepEqual(await leftBy(ctx.sql, r.pid), [])
}

test("ctx.pg.Client: connect(cb) calls back (null, client), connect() resolves the client, query calls back (null, result), end(cb) calls back, 'connect' listeners are called", async () => {
  await held(
    moduleFile(
      'client.race.mjs',
      `(db, ctx) => new Promise((resolve, reject) => {
    const c = new ctx.pg.Client()
    let heard = 0
    c.on('connect', function () { heard++ })
    c.connect((err, client) => {
      try {
        check(err === null, 'connect called back with err ' + err)
        check(client === c, 'connect called back without the client')
      } catch (e) { return reject(e) }
      client.query("insert into t values ('connect-cb')", (err2, res) => {
        try {
          check(err2 === null, 'query called back with err ' + err2)
          check(res && res.command === 'INSERT' && res.rowCount === 1, 'query called back without its result')
          check(heard === 1, "the 'connect' listener was called " + heard + ' times')
        } catch (e) { return reject(e) }
        client.query('select $1::int as one', [1], (err3, res3) => {
          try {
            check(err3 === null && res3.rows[0].one === 1, 'a query with values called back with ' + err3)
          } catch (e) { return reject(e) }
          c.end((err4) => (err4 ? reject(err4) : resolve()))
        })
      })
    })
  }).then(async () => {
    const d = new ctx.pg.Client()
    const got = await d.connect()
    check(got === d, 'connect() resolved ' + got + ', not the client')
    await got.query("insert into t values ('connect-promise')")
    await d.end()
  })`,
      2,
    ),
  )
})

test("ctx.pg.Pool: connect(cb) calls back (undefined, client, release) with 'connect', 'acquire' and 'release' events, connect() resolves a client with release, query(cb) and end(cb) call back; ctx.pool's connect(cb) calls back later", async () => {
  await held(
    moduleFile(
      'pool.race.mjs',
      `(db, ctx) => new Promise((resolve, reject) => {
    const pool = new ctx.pg.Pool()
    const events = []
    pool.on('connect', (c) => events.push('connect'))
    pool.on('acquire', (c) => events.push('acquire'))
    pool.on('release', (err, c) => events.push('release ' + err))
    pool.connect((err, client, release) => {
      try {
        check(err === undefined, 'connect called back with err ' + err)
        check(client && typeof client.query === 'function', 'connect called back without a client')
        check(typeof release === 'function', 'connect called back without release')
      } catch (e) { return reject(e) }
      client.query("insert into t values ('pool-connect-cb')", (err2) => {
        release()
        try {
          check(!err2, 'query failed ' + err2)
          check(events.join() === 'connect,acquire,release undefined', 'events ' + events.join())
        } catch (e) { return reject(e) }
        pool.query("insert into t values ('pool-query-cb')", (err3, res) => {
          try { check(!err3 && res.rowCount === 1, 'pool.query called back with ' + err3) } catch (e) { return reject(e) }
          let sync = true
          ctx.pool.connect((err4, c2, release2) => {
            try {
              check(!sync, 'ctx.pool.connect called back before it returned')
              check(!err4 && typeof c2.query === 'function' && typeof release2 === 'function', 'ctx.pool.connect called back with ' + err4)
            } catch (e) { return reject(e) }
            release2()
            pool.end(() => resolve())
          })
          sync = false
        })
      })
    })
  }).then(async () => {
    const pool = new ctx.pg.Pool()
    const c = await pool.connect()
    check(typeof c.release === 'function', 'connect() resolved a client without release')
    await c.query("insert into t values ('pool-connect-promise')")
    c.release()
    await pool.end()
  })`,
      3,
    ),
  )
})

test("an exception thrown in the code's own listener (a notice listener on ctx.pg's client or on db, called from the connection's socket) is the session's failure, named: never race's internal error", async () => {
  for (const on of ['c', 'db']) {
    const file = moduleFile(
      `notice-${on}.race.mjs`,
      `async (db, ctx) => {
    const c = new ctx.pg.Client()
    await c.connect()
    ${on}.on('notice', () => { if (ctx.index === 0) throw new TypeError('boom in my notice listener') })
    await c.query("do $$ begin raise notice 'hi'; end $$")
    await c.query("insert into t values ('x')")
    await c.end()
  }`,
      1,
    )
    const r = await race(['run', file, '--database-url', ctx.server.url])
    assert.equal(r.code, 3, r.stdout + r.stderr)
    assert.doesNotMatch(r.stderr, /internal error|please report/, on)
    assert.match(r.stderr, /^race: could not decide: s1 left an uncaught exception TypeError: boom in my notice listener/m, on)
    assert.deepEqual(await leftBy(ctx.sql, r.pid), [])
  }
})
