// What the InnoDB (MySQL/MariaDB) forms of the scenarios share. MySQL sets a transaction's level with SET
// TRANSACTION before START TRANSACTION; it has no writable CTEs and no RETURNING on UPDATE, and an INSERT ... SELECT
// reads its source with shared next-key locks at REPEATABLE READ and SERIALIZABLE (a locking read, which sees the
// newest committed rows, not the snapshot). So a read is a plain SELECT step, and what it returned is written down by
// a separate step of the same transaction (`keep`), which reads nothing. "Documented" means the MySQL Reference
// Manual's InnoDB chapter ("Transaction Isolation Levels", "Consistent Nonlocking Reads", "Locking Reads", "InnoDB
// Locking", "Locks Set by Different SQL Statements", "Deadlocks in InnoDB") and the MariaDB Knowledge Base.
import { type CheckCase, type EngineDoc, type Params, type Scenario, type Variant } from '../../src/scenario.js'
import { levelsOn, type Level } from '../../src/levels.js'

/** The InnoDB levels: READ UNCOMMITTED too (it reads uncommitted rows; PostgreSQL's does not). */
export const INNODB_LEVELS: readonly Level[] = levelsOn('mysql')

/** `set transaction isolation level X; start transaction`: one step, two statements, no binds. */
export const myBegin = (level: string): string => `set transaction isolation level ${level}; start transaction`

/** The begin step of the isolation family on either engine (PostgreSQL's text is unchanged). */
export function beginFor(v: Pick<Variant, 'engine' | 'params'>): string {
  return v.engine === 'mysql' ? myBegin(String(v.params.isolation)) : `begin isolation level ${v.params.isolation}`
}

/** The reads table, InnoDB form. */
export const myReadsTable = `create table read_log (
  session varchar(20)    not null,
  step    varchar(20)    not null,
  value   decimal(12, 2) not null,
  primary key (session, step)
)`

/** Writes down what step `from` of this session returned (its column `value`) as read `label`. */
export const keep = (label: string, from = label): string => `insert into read_log (session, step, value) values (:session, '${label}', :${from}.value)`

/** What one session read at `a` and at `b` (NULL when a read is missing), as columns first and second. */
export function myReadsOf(session: string, a: string, b: string): string {
  return `(select cast(value as signed) from read_log where session = '${session}' and step = '${a}') as first,
       (select cast(value as signed) from read_log where session = '${session}' and step = '${b}') as second`
}

/** Manual references used by the InnoDB documented outcomes. */
export const M = {
  RU: 'READ UNCOMMITTED: SELECTs are nonlocking and may see an earlier, uncommitted version of a row, a dirty read (InnoDB: Transaction Isolation Levels)',
  RC: 'READ COMMITTED: each consistent read sets and reads its own fresh snapshot (InnoDB: Transaction Isolation Levels)',
  RR: 'REPEATABLE READ: consistent reads within the transaction read the snapshot established by the first read (InnoDB: Consistent Nonlocking Reads)',
  SER: 'SERIALIZABLE: InnoDB implicitly converts plain SELECT to SELECT ... FOR SHARE (autocommit off), so a writer waits for the reader (InnoDB: Transaction Isolation Levels)',
  LOCKING: 'a locking read (FOR UPDATE / FOR SHARE), UPDATE and DELETE read the latest committed version, not the snapshot (InnoDB: Locking Reads)',
  DEADLOCK: 'InnoDB detects the deadlock at once and rolls back one transaction with 1213 ER_LOCK_DEADLOCK (SQLSTATE 40001): the smaller one, so with equal sizes either may be chosen (InnoDB: Deadlocks in InnoDB)',
  GAP: 'REPEATABLE READ and SERIALIZABLE: a locking read of a range takes next-key and gap locks that block inserts into it; READ COMMITTED (and READ UNCOMMITTED) take no gap locks (InnoDB Locking: Gap Locks)',
} as const

export const DEADLOCK = '40001/1213'
export const DUPLICATE = '23000/1062'

/** The level param of a variant, as a Level. */
export const levelOf = (p: Params): Level => String(p.isolation) as Level

/** A scenario's InnoDB form, kept apart from its PostgreSQL form (which stays exactly as it was written). */
export interface InnodbForm {
  setup?: Scenario['setup']
  sessions: Scenario['sessions']
  permutation?: Scenario['permutation']
  /** The invariant's SQL on MySQL (its `held` is 1, 0 or NULL). */
  invariantSql?: string
  documented: EngineDoc
  /** Cases race check runs on InnoDB only. */
  checks?: CheckCase[]
}

/**
 * The scenario `s` (its PostgreSQL form, untouched) with an InnoDB form: on a mysql:// target its sessions, setup,
 * permutation and invariant SQL come from `my`, and `documented.mysql` is what InnoDB is documented to do.
 */
export function withInnodb(s: Scenario, my: InnodbForm): Scenario {
  const mysql = (v: Variant) => v.engine === 'mysql'
  const resolve = <T>(x: T | ((v: Variant) => T), v: Variant): T => (typeof x === 'function' ? (x as (v: Variant) => T)(v) : x)
  return {
    ...s,
    setup: (v) => (mysql(v) && my.setup ? resolve(my.setup, v) : resolve(s.setup, v)),
    sessions: (v) => (mysql(v) ? my.sessions(v) : s.sessions(v)),
    ...(s.permutation || my.permutation
      ? { permutation: (v: Variant) => (mysql(v) && my.permutation ? resolve(my.permutation, v) : resolve(s.permutation ?? '', v)) }
      : {}),
    invariant: { ...s.invariant, sql: (v) => (mysql(v) && my.invariantSql ? my.invariantSql : resolve(s.invariant.sql, v)) },
    documented: { ...s.documented, mysql: my.documented },
    checks: [...(s.checks ?? []), ...(my.checks ?? []).map((k) => ({ ...k, engines: ['mysql' as const] }))],
  }
}
