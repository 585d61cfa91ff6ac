// Defect 7: the reset between trials undoes whatever a session changed about its kept connection (SET ROLE,
// search_path, a GUC set with plain SET); a connection whose reset cannot be shown complete is not kept.
// Against a real server (DATABASE_URL, else embedded PostgreSQL).
import assert from 'node:assert/strict'
import path from 'node:path'
import { test } from 'node:test'
/* eslint-disable @typescript-eslint/no-explicit-any -- the drivers are the user's, untyped here */
import { appScenario } from '../../src/app/scenario.js'
import { ROOT, runScenario, useLab } from '../support/server.js'

const ctx = useLab()
const TABLE = 'create table orders (id bigserial primary key, status text not null)'

interface Seen {
  same: boolean
  sp: string
  wm: string
}

for (const driver of ['pg', 'postgres'] as const) {
  test(`application race (${driver}): SET ROLE, search_path and a plain SET do not reach the next trial`, async () => {
    const seen: Seen[] = []
    const q = async (db: any, text: string) => (driver === 'pg' ? (await db.query(text)).rows : await db.unsafe(text))
    const s = appScenario(
      {
        driver,
        setup: [TABLE],
        invariant: 'select true',
        expect: 'held',
        session: async (db: unknown) => {
          const [r] = await q(db, "select current_user = session_user as same, current_setting('search_path') as sp, current_setting('work_mem') as wm")
          seen.push({ same: r.same, sp: r.sp, wm: r.wm })
          await q(db, "insert into orders (status) values ('x')")
          await q(db, 'set role pg_read_all_data')
          await q(db, "set work_mem = '7MB'")
          await q(db, 'set search_path = pg_catalog')
        },
      },
      path.join(ROOT, 'examples', 'app', 'orders.race.mjs'),
    )
    const out = await runScenario(ctx.lab, s, { n: 2, schedule: 'lockstep', trials: 3 })
    assert.equal(seen.length, 6)
    for (const x of seen) {
      assert.equal(x.same, true, `a session starts as the role it logged in as: ${JSON.stringify(seen)}`)
      assert.notEqual(x.wm, '7MB', 'work_mem set by the last trial')
      assert.equal(x.sp, seen[0].sp, 'search_path as a fresh connection has it')
    }
    for (const t of out.trials) for (const x of t.sessions) assert.equal(x.outcome, 'committed', `${x.name}: ${x.outcome} ${x.errors}`)
    // A complete reset reads back the state the connection opened with: it is kept (the same backends every trial).
    assert.deepEqual(out.trials[2].sessions.map((x) => x.pid), out.trials[0].sessions.map((x) => x.pid), 'connections kept')
  })
}
