// The row races of rows.test.ts (issue 41, item 6): steps on rows of one table, each reaching its row by the primary
// key or not (a key's update, an insert, a predicate over another column, a lock that does not wait), whose outcomes
// depend on which steps on a same row come first.
import type { Case } from './generate.js'

const TABLE = 'setup { create table t (id int primary key, v int not null); insert into t values (1, 1), (2, 1) }'

function spec(id: string, invariant: string, sessions: string[][]): Case {
  const text = [TABLE, `invariant "${invariant}" { ${invariant} }`, 'expect held', '']
  sessions.forEach((steps, i) => {
    text.push(`session s${i + 1}`)
    steps.forEach((s, j) => text.push(`step s${i + 1}x${j + 1} { ${s} }`))
    text.push('')
  })
  return { id, kind: 'spec', file: `rows-${id}.spec`, text: text.join('\n'), features: ['spec', 'rows', `${sessions.length}-sessions`], sessions: sessions.length }
}

export const ROW_CASES: Case[] = [
  // Two sessions on row 1 (their order decides its value), one of them on row 2 too.
  spec('same-row', 'select (select v from t where id = 1) = 3 and (select v from t where id = 2) = 6', [
    ['begin', 'update t set v = v * 2 where id = 1', 'update t set v = v + 5 where id = 2', 'commit'],
    ['begin', 'update t set v = v + 1 where id = 1', 'commit'],
  ]),
  // A key moved from 1 to 5 meets a change of row 5 by its key: as rows, 5 is not 1.
  spec('key-update', 'select coalesce((select v from t where id = 5), 0) = 1', [
    ['begin', 'update t set id = 5 where id = 1', 'commit'],
    ['begin', 'update t set v = v * 10 where id = 5', 'delete from t where id = 2', 'commit'],
  ]),
  // An insert of row 3 meets a change and a lock of row 3 by its key.
  spec('insert', 'select (select coalesce(sum(v), 0) from t) = 9', [
    ['begin', 'insert into t values (3, 7)', 'commit'],
    ['begin', 'select v from t where id = 3 for update nowait', 'update t set v = v * 2 where id = 3', 'commit'],
  ]),
  // A predicate over another column (the whole table) meets a change of row 2 by its key.
  spec('predicate', 'select (select v from t where id = 2) = 4', [
    ['begin', 'update t set v = v * 2 where v > 1', 'commit'],
    ['begin', 'update t set v = v + 1 where id = 2', 'commit'],
  ]),
  // A lock that does not wait meets a change of its row, and not of the other.
  spec('nowait', 'select (select v from t where id = 1) = 2', [
    ['begin', 'select v from t where id = 1 for update nowait', 'update t set v = v + 1 where id = 1', 'commit'],
    ['begin', 'update t set v = v * 3 where id = 1', 'update t set v = v * 3 where id = 2', 'commit'],
  ]),
  // A snapshot taken by a read of row 1 at REPEATABLE READ, then a change of row 2 that another session deletes.
  spec('repeatable-read', 'select (select count(*) from t) = 2', [
    ['begin isolation level repeatable read; select v from t where id = 1', 'update t set v = v + 1 where id = 2', 'commit'],
    ['begin; update t set v = v + 10 where id = 1', 'delete from t where id = 2', 'commit'],
  ]),
  // Three sessions, each a row of its own but the third's table-wide change.
  spec('three', 'select (select sum(v) from t) = 12', [
    ['begin; update t set v = v + 1 where id = 1', 'commit'],
    ['begin; update t set v = v * 5 where id = 2', 'commit'],
    ['begin; update t set v = v * 2 where id < 3', 'commit'],
  ]),
  // An application race: each session reads row 1 by its key and writes what it read plus one (a lost update), the
  // second writes row 2 too; the reads' results are JavaScript's, so reads of row 1 must meet commits of row 1.
  {
    id: 'app-lost-update',
    kind: 'app',
    file: 'rows-app-lost-update.race.mjs',
    sessions: 2,
    features: ['app', 'rows', '2-sessions'],
    text: `export default {
  driver: 'pg',
  sessions: 2,
  setup: ['create table t (id int primary key, v int not null)', 'insert into t values (1, 1), (2, 1)'],
  connection: { default_transaction_isolation: 'read committed' },
  session: async (db, ctx) => {
    await db.query('begin')
    const r = await db.query('select v from t where id = 1')
    await db.query('update t set v = ' + (Number(r.rows[0].v) + 1) + ' where id = 1')
    if (ctx.session === 's2') await db.query('update t set v = v + 1 where id = 2')
    await db.query('commit')
  },
  invariant: 'select v = 3 from t where id = 1',
  expect: 'held',
}
`,
  },
]

/**
 * An application race of two sessions over t: s1's queries one after another in a transaction, s2 reading row `row`
 * outside one and failing when it is not as the setup left it (so whether s1's change came first is in its ending,
 * and s2 commits no write: no other step orders the two).
 */
function reader(id: string, s1: string[], row: number): Case {
  return {
    id,
    kind: 'app',
    file: `rows-${id}.race.mjs`,
    sessions: 2,
    features: ['app', 'rows', '2-sessions'],
    text: `const s1 = ${JSON.stringify(['begin', ...s1, 'commit'])}
export default {
  driver: 'pg',
  sessions: 2,
  setup: ['create table t (id int primary key, v int not null)', 'insert into t values (1, 1), (2, 1)'],
  connection: { default_transaction_isolation: 'read committed' },
  session: async (db, ctx) => {
    if (ctx.session === 's1') for (const q of s1) await db.query(q)
    else {
      const r = await db.query('select v from t where id = ${row}')
      if (${row} <= 2 ? Number(r.rows[0]?.v) !== 1 : r.rows.length) throw new Error('row ${row} changed')
    }
  },
  invariant: 'select true',
  expect: 'held',
}
`,
  }
}

ROW_CASES.push(
  // A read of row 1 by its key meets the commit of a change of row 1.
  reader('read-row', ['update t set v = 2 where id = 1'], 1),
  // A key moved from 1 to 5: its commit meets a read of row 5 (the update is the whole table's, not row 1's).
  reader('read-new-key', ['update t set id = 5 where id = 1'], 5),
  // An insert of row 3, then a change of row 1: the commit writes the whole table, and meets a read of row 3.
  reader('read-inserted', ['insert into t values (3, 1)', 'update t set v = 2 where id = 1'], 3),
  // A change of row 2 only: the read of row 1 commutes with it (either order, the same ending).
  reader('read-other-row', ['update t set v = 2 where id = 2'], 1),
)
