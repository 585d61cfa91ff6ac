// The lost-update family of the isolation-levels article (lost update and its three fixes): one account, a
// deposit of 50 (t1) and a withdrawal of 30 (t2). Each session records the delta it applied in `applied`
// by the same statement that changes the balance, so the invariant is a real query: balance = 100 + deltas.
import { clean, prevented, type DocEntry, type EngineDoc, type Invariant, type Params, type SessionSpec, type Step } from '../../src/scenario.js'
import { RR_UPDATE, begin } from './isolation.js'

export const tables = [
  `create table accounts (id int primary key, balance int not null, version int not null default 1)`,
  `insert into accounts (id, balance) values (1, 100)`,
  `create table applied (session text primary key, delta int not null, attempts int not null default 1)`,
]

const DELTA: Record<string, number> = { t1: 50, t2: -30 }
const signed = (d: number) => (d >= 0 ? `+ ${d}` : `- ${-d}`)

/** UPDATE accounts SET <set> WHERE <where>, and the ledger row in applied, in one statement; yields the new balance. */
function apply(session: string, set: string, where = 'id = 1'): string {
  return `with u as (update accounts set ${set} where ${where} returning balance, version),
     a as (insert into applied (session, delta, attempts) select :session, ${DELTA[session]}, :attempt::int from u)
select balance, version from u`
}

/** The article's broken read-modify-write: the application computes the new balance from its read. */
export function readModifyWrite(p: Params, session: string, forUpdate = false): SessionSpec {
  return {
    steps: {
      begin: begin(p),
      read: `select balance from accounts where id = 1${forUpdate ? ' for update' : ''}`,
      update: apply(session, `balance = :read.balance ${signed(DELTA[session])}`),
      commit: 'commit',
    },
  }
}

/** Fix 1: the arithmetic in the UPDATE itself. */
export function atomic(p: Params, session: string): SessionSpec {
  return { steps: { begin: begin(p), update: apply(session, `balance = balance ${signed(DELTA[session])}`), commit: 'commit' } }
}

/** Fix 3: optimistic version column; on 0 rows the article rolls back and starts again, up to --max-tries attempts. */
export function versioned(p: Params, session: string): SessionSpec {
  const update: Step = {
    sql: apply(session, `balance = :read.balance ${signed(DELTA[session])}, version = version + 1`, 'id = 1 and version = :read.version'),
    retryIf: ({ result }) => result.length === 0 && 'the version changed on every try: OptimisticLockError',
  }
  return {
    steps: { begin: begin(p), read: 'select balance, version from accounts where id = 1', update, commit: 'commit' },
    retry: { max: Number(p.maxTries) - 1 },
  }
}

export const invariant: Invariant = {
  description: 'no update is lost: balance = 100 + every committed delta',
  sql: `select balance = 100 + deltas as held, balance, deltas, committed
  from (select (select balance from accounts where id = 1) as balance,
               (select coalesce(sum(delta), 0)::int from applied) as deltas,
               (select coalesce(string_agg(session || ' ' || delta || case when attempts > 1 then ' (attempt ' || attempts || ')' else '' end, ', ' order by session), 'none') from applied) as committed) x`,
  observed: (r) => `balance ${r.balance}, committed ${r.committed}: should be ${100 + Number(r.deltas)}`,
}

export const BOTH = { t1: 'committed', t2: 'committed' }
const T2_FAILS = { t1: 'committed', t2: '40001' }

/** What PostgreSQL documents for the family: at READ COMMITTED `rc`; above it, the first updater wins (13.2.2). */
export function documented(rc: DocEntry): EngineDoc {
  return {
    levels: {
      'read committed': rc,
      'repeatable read': prevented(RR_UPDATE, T2_FAILS),
      serializable: prevented(RR_UPDATE, T2_FAILS),
    },
    serial: clean('t2 reads what t1 committed', BOTH),
  }
}
