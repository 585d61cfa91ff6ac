// The lost-update family of the isolation-levels article (lost update and its three fixes): one account, a
// deposit of 50 (t1) and a withdrawal of 30 (t2). Each session records the delta it applied in `applied`
// by the same statement that changes the balance, so the invariant is a real query: balance = 100 + deltas.
import { anomaly, clean, prevented, serialized, type DocEntry, type EngineDoc, type Invariant, type Params, type SessionSpec, type Step, type Variant } from '../../src/scenario.js'
import { RR_UPDATE, begin } from './isolation.js'
import { DEADLOCK, M, myBegin } from './innodb.js'

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
  sql: ({ engine }) =>
    engine === 'mysql'
      ? `select balance = 100 + deltas as held, balance, deltas, committed
  from (select (select balance from accounts where id = 1) as balance,
               (select cast(coalesce(sum(delta), 0) as signed) from applied) as deltas,
               (select coalesce(group_concat(concat(session, ' ', delta, case when attempts > 1 then concat(' (attempt ', attempts, ')') else '' end) order by session separator ', '), 'none') from applied) as committed) x`
      : `select balance = 100 + deltas as held, balance, deltas, committed
  from (select (select balance from accounts where id = 1) as balance,
               (select coalesce(sum(delta), 0)::int from applied) as deltas,
               (select coalesce(string_agg(session || ' ' || delta || case when attempts > 1 then ' (attempt ' || attempts || ')' else '' end, ', ' order by session), 'none') from applied) as committed) x`,
  observed: (r) => `balance ${r.balance}, committed ${r.committed}: should be ${100 + Number(r.deltas)}`,
}

// ---- InnoDB forms: MySQL has no writable CTE, so the ledger row is a step of its own, right after the UPDATE,
// in the same transaction (it commits or rolls back with it). With --snapshot-isolation (MariaDB) each session
// first sets innodb_snapshot_isolation=ON for itself.

const ledger = (session: string) => `insert into applied (session, delta, attempts) values (:session, ${DELTA[session]}, :attempt)`

/** The step that turns MariaDB's snapshot isolation on for this session (only with --snapshot-isolation). */
function snapshotStep(p: Params): Record<string, Step> {
  return p.snapshotIsolation ? { snapshot: 'set session innodb_snapshot_isolation = on' } : {}
}

/** InnoDB: the article's read-modify-write (FOR UPDATE: fix 2). */
export function myReadModifyWrite(p: Params, session: string, forUpdate = false): SessionSpec {
  return {
    steps: {
      ...snapshotStep(p),
      begin: myBegin(String(p.isolation)),
      read: `select balance from accounts where id = 1${forUpdate ? ' for update' : ''}`,
      update: `update accounts set balance = :read.balance ${signed(DELTA[session])} where id = 1`,
      ledger: ledger(session),
      commit: 'commit',
    },
  }
}

/** InnoDB fix 1: the arithmetic in the UPDATE. */
export function myAtomic(p: Params, session: string): SessionSpec {
  return { steps: { begin: myBegin(String(p.isolation)), update: `update accounts set balance = balance ${signed(DELTA[session])} where id = 1`, ledger: ledger(session), commit: 'commit' } }
}

/** InnoDB fix 3: the optimistic version column; 0 rows changed (the OK packet's affected rows) means try again. */
export function myVersioned(p: Params, session: string): SessionSpec {
  const update: Step = {
    sql: `update accounts set balance = :read.balance ${signed(DELTA[session])}, version = version + 1 where id = 1 and version = :read.version`,
    retryIf: ({ result }) => result.count === 0 && 'the version changed on every try: OptimisticLockError',
  }
  return {
    steps: { begin: myBegin(String(p.isolation)), read: 'select balance, version from accounts where id = 1', update, ledger: ledger(session), commit: 'commit' },
    retry: { max: Number(p.maxTries) - 1 },
  }
}

/** The tables, InnoDB form (the same, but MySQL's types). */
export const myTables = [
  `create table accounts (id int primary key, balance int not null, version int not null default 1)`,
  `insert into accounts (id, balance) values (1, 100)`,
  `create table applied (session varchar(10) primary key, delta int not null, attempts int not null default 1)`,
]

/** The family's InnoDB permutation: each UPDATE followed by its ledger step. */
export const myPermutation = (perm: string): string => perm.replace(/\b(t[12])\.update\b/g, '$1.update $1.ledger')

const EITHER_DIES = [prevented(M.DEADLOCK, { t1: 'committed', t2: DEADLOCK }), prevented(M.DEADLOCK, { t1: DEADLOCK, t2: 'committed' })]

/**
 * What InnoDB documents for the read-modify-write (lost-update): the second UPDATE overwrites at READ UNCOMMITTED,
 * READ COMMITTED and REPEATABLE READ (the article: "MySQL RR does not detect it"); at SERIALIZABLE both reads take
 * shared locks and the two UPDATEs deadlock. MariaDB's innodb_snapshot_isolation=ON makes REPEATABLE READ refuse
 * the UPDATE of a row changed after the snapshot: 1020 ER_CHECKREAD (MariaDB KB, innodb_snapshot_isolation).
 */
export function myLostUpdate(): EngineDoc {
  const lost = anomaly(`${M.LOCKING}: the second UPDATE writes the balance it computed from its stale read`, BOTH)
  return {
    levels: {
      'read uncommitted': lost,
      'read committed': lost,
      'repeatable read': (v: Variant) =>
        v.params.snapshotIsolation
        ? prevented('innodb_snapshot_isolation=ON: a locking read of a row changed after the read view fails with 1020 ER_CHECKREAD (MariaDB KB)', { t1: 'committed', t2: 'HY000/1020' })
        : lost,
      serializable: EITHER_DIES,
    },
    serial: clean('t2 reads what t1 committed', BOTH),
  }
}

/** InnoDB: a fix whose second transaction waits for the first at every level and then works on its committed row. */
export function myWaits(why: string): EngineDoc {
  const waits = serialized(`${why} (${M.LOCKING})`, BOTH)
  return { levels: { 'read uncommitted': waits, 'read committed': waits, 'repeatable read': waits, serializable: waits }, serial: clean('t2 reads what t1 committed', BOTH) }
}

/** InnoDB: the optimistic fix: 0 rows at every level below SERIALIZABLE (the UPDATE reads the newest version); a deadlock at SERIALIZABLE. */
export function myOptimistic(): EngineDoc {
  const again = (v: Variant) =>
    Number(v.params.maxTries) > 1
      ? clean(`WHERE version = :v matches nothing (${M.LOCKING}); t2 reads again and its next try writes`, BOTH)
      : clean('WHERE version = :v matches nothing and no try is left: t2 gives up', { t1: 'committed', t2: 'rejected: the version changed on every try: OptimisticLockError' })
  return { levels: { 'read uncommitted': again, 'read committed': again, 'repeatable read': again, serializable: EITHER_DIES }, serial: clean('t2 reads what t1 committed', BOTH) }
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
