// The lost-update family of the isolation-levels article (更新の消失 and its three fixes): one account, a
// deposit of 50 (T1) and a withdrawal of 30 (T2). Each session records the delta it applied in `applied`
// by the same statement that changes the balance, so the invariant is a real query: balance = 100 + deltas.
import type { Invariant, Params, SessionSpec, StepDef } from '../../src/scenario.js'
import { begin } from './isolation.js'

export const tables = [
  `create table accounts (id int primary key, balance int not null, version int not null default 1)`,
  `insert into accounts (id, balance) values (1, 100)`,
  `create table applied (session text primary key, delta int not null, attempts int not null default 1)`,
]

export const DELTA: Record<string, number> = { t1: 50, t2: -30 }
const signed = (d: number) => (d >= 0 ? `+ ${d}` : `- ${-d}`)

/** UPDATE ... SET <set> plus the ledger row, in one statement; yields the new balance. */
function apply(sql: import('postgres').Sql, session: string, set: string, where = 'id = 1', attempts = 1) {
  return sql.unsafe(
    `with u as (update accounts set ${set} where ${where} returning balance, version),
          a as (insert into applied (session, delta, attempts) select $1, $2, $3 from u)
     select balance, version from u`,
    [session, DELTA[session], attempts],
  )
}

/** The article's broken read-modify-write: the application computes the new balance from its read. */
export function readModifyWrite(p: Params, session: string, forUpdate = false): SessionSpec {
  const d = DELTA[session]
  const read = `select balance from accounts where id = 1${forUpdate ? ' for update' : ''}`
  const update: StepDef = {
    sql: `update accounts set balance = :read ${signed(d)} where id = 1  -- computed by the application; ledger row in applied`,
    run: (sql, ctx) => apply(sql, session, `balance = ${Number(ctx.prior.read[0].balance) + d}`),
  }
  return { steps: { begin: begin(p), read, update, commit: 'commit' } }
}

/** Fix 1: the arithmetic in the UPDATE itself. */
export function atomic(p: Params, session: string): SessionSpec {
  const d = DELTA[session]
  const update: StepDef = {
    sql: `update accounts set balance = balance ${signed(d)} where id = 1  -- ledger row in applied`,
    run: (sql) => apply(sql, session, `balance = balance ${signed(d)}`),
  }
  return { steps: { begin: begin(p), update, commit: 'commit' } }
}

/** Fix 3: optimistic version column; on 0 rows the article rolls back and starts again, up to max tries. */
export function versioned(p: Params, session: string): SessionSpec {
  const d = DELTA[session]
  const tries = Number(p.maxTries)
  const update: StepDef = {
    sql:
      `update accounts set balance = :balance ${signed(d)}, version = version + 1 where id = 1 and version = :version\n` +
      `-- 0 rows: rollback; begin; read again; update again (at most --max-tries ${tries} attempts, else give up)`,
    run: async (sql, ctx) => {
      let row = ctx.prior.read[0]
      for (let attempt = 1; attempt <= tries; attempt++) {
        const done = await apply(sql, session, `balance = ${Number(row.balance) + d}, version = version + 1`, `id = 1 and version = ${Number(row.version)}`, attempt)
        if (done.length === 1) return [{ ...done[0], attempts: attempt }]
        if (attempt === tries) break
        await sql.unsafe('rollback')
        await sql.unsafe(begin(p))
        ;[row] = await sql.unsafe('select balance, version from accounts where id = 1')
      }
      return [{ gave_up: tries }]
    },
  }
  const commit: StepDef = {
    sql: '-- after --max-tries attempts without a match: rollback, OptimisticLockError\ncommit',
    run: (_sql, ctx) => (ctx.prior.update[0]?.gave_up ? ctx.reject(`version changed on all ${tries} attempts: OptimisticLockError`) : 'commit'),
  }
  return { steps: { begin: begin(p), read: 'select balance, version from accounts where id = 1', update, commit } }
}

export const invariant: Invariant = {
  description: () => 'no update is lost: balance = 100 + every committed delta',
  query: (sql) =>
    sql`select balance, (select coalesce(sum(delta), 0)::int from applied) as deltas,
               (select coalesce(string_agg(session || ' ' || delta || case when attempts > 1 then ' (attempt ' || attempts || ')' else '' end, ', ' order by session), 'none') from applied) as committed
        from accounts where id = 1`,
  observed: ([r]) => `balance ${r.balance}, committed ${r.committed}: should be ${100 + Number(r.deltas)}`,
  holds: ([r]) => Number(r.balance) === 100 + Number(r.deltas),
}
