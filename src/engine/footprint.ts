// What a step touched, from the server's own facts, for race explore's reduced search (explore/reduce.ts).
//
// At every quiet moment of an explored trial (each session ready, waiting, or done), the control connection reads,
// for the sessions' backends, the locks each holds (pg_locks) and where its transaction stands (pg_stat_activity:
// in a transaction or not, which transaction, whether it keeps a snapshot, whether it has a transaction id, i.e.
// wrote). A step's footprint is worked out from what its session held before it and after it:
//
//  - a table among its relation locks (AccessShareLock, RowShareLock, RowExclusiveLock; SIReadLock): read. Locks are
//    held to the transaction's end, so the locks after a step cover what every earlier step of its transaction
//    touched too: more than the step did, never less (a second read of a table shows no new lock). A row change is
//    a read too until its transaction commits: no other session sees it before, and one that would touch the same
//    row waits (unclassified). So two sessions' uncommitted steps on one table commute; a commit does not.
//  - a sequence's lock (nextval): a write (another session sees the value taken at once).
//  - an advisory lock: a write of 'advisory' (taking it, or letting it go, orders the others' attempts). One resource
//    for every key: a key is often made from a value fresh in each trial, and footprints are compared across trials.
//  - names, not oids: a table is named by schema and name (the run's schema is made again, with new oids, before
//    every trial, and the search compares what steps touched across trials).
//  - a step after which the transaction keeps a snapshot (REPEATABLE READ, SERIALIZABLE: from the first statement
//    after BEGIN; a driver's open portal) reads 'snapshot', which every commit of a transaction that wrote writes:
//    what it sees may depend on which commits came before it. At READ COMMITTED each statement's own snapshot is
//    covered by its tables.
//  - a lone COMMIT/ROLLBACK of a transaction that wrote: writes the tables it changed (row locks or changes),
//    'snapshot' and its advisory keys (reads what it read). Of one that only read (no transaction id): only its
//    advisory keys (it changes nothing another session can see). At SERIALIZABLE (SIRead locks in the trial) a
//    change is a write at once (SSI orders it against others' reads), and a commit decides who fails: 'all'.
//  - a relation lock stronger than a row change (DDL, LOCK TABLE): unclassified.
//
// 'all' (conflicts with every step) where race cannot tell: not PostgreSQL or not a backend of its own (MySQL,
// MariaDB, a pooler), a lock it does not know, a lock not granted (the step waits), a step whose transaction ended
// inside it with more than COMMIT/ROLLBACK (what it touched is gone with its locks), a statement outside any
// transaction (autocommit: the same), a step that raised an error, woke or ended another session. What locks cannot
// show at all (code the server runs for a step, locks given back by a rolled-back subtransaction, state read without
// a lock: pg_locks, pg_stat_activity, txid functions, ...) makes a step 'all' in engine/doubt.ts, from the catalogs.
import type { Driver } from '../db/driver.js'

/** What a step touched: see explore/reduce.ts. Declared here too, so that the engine needs nothing from above. */
export type Touched = 'all' | { readonly reads: readonly string[]; readonly writes: readonly string[] }

/** One session's backend at a quiet moment. */
export interface Seen {
  inTx: boolean
  /** The transaction's start (its identity between two moments), null outside one. */
  xact: string | null
  /** Keeps a snapshot (backend_xmin): REPEATABLE READ or SERIALIZABLE after its first statement. */
  xmin: boolean
  /** Has a transaction id: it wrote (or locked rows). */
  xid: boolean
  /**
   * [locktype, mode, granted, relation, relkind]; the relation by its schema-qualified name (the same
   * from one trial to the next, where its oid is not: the schema is made again), '?' when control cannot see it (a
   * table created in the session's open transaction).
   */
  locks: [string, string, boolean, string, string][]
}

/**
 * Reads what the backends `pids` hold (one query on control), or undefined when race cannot read such facts on
 * this driver (MySQL/MariaDB, a pooler, whose sessions' backends change).
 */
export async function observe(lab: Driver, pids: readonly number[]): Promise<Map<number, Seen> | undefined> {
  if (lab.engine !== 'postgres' || lab.afterTrial) return undefined
  const own = pids.filter((p) => Number.isInteger(p) && p > 0)
  if (!own.length) return new Map()
  const rows = await lab.query(
    `select a.pid, a.xact_start is not null as "inTx", a.xact_start::text as xact, a.backend_xmin is not null as xmin,
       a.backend_xid is not null as xid,
       coalesce((select json_agg(json_build_array(l.locktype, l.mode, l.granted, coalesce((select n.nspname || '.' || c.relname from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace where c.oid = l.relation), case when l.relation is null then '' else '?' end),
         coalesce((select c.relkind::text from pg_catalog.pg_class c where c.oid = l.relation), '')))
         from pg_catalog.pg_locks l where l.pid = a.pid), '[]')::text as locks
     from pg_catalog.pg_stat_activity a where a.pid operator(pg_catalog.=) any ($1::pg_catalog.int4[])`,
    // Prepared on control with a generic plan (a read at every quiet moment of a learning search): planning it again
    // each time was most of its cost (PostgreSQL 15, pgbench: 0.88 ms a read as a simple query, 0.15 ms prepared).
    [`{${own.join(',')}}`],
    true,
  )
  const out = new Map<number, Seen>()
  for (const r of rows) {
    out.set(Number(r.pid), { inTx: Boolean(r.inTx), xact: (r.xact as string | null) ?? null, xmin: Boolean(r.xmin), xid: Boolean(r.xid), locks: JSON.parse(String(r.locks)) })
  }
  return out
}

/** A step that is nothing but the end of its transaction: COMMIT, END, ROLLBACK, ABORT (WORK|TRANSACTION). */
export const LONE_END = /^\s*(commit|end|rollback|abort)(\s+(work|transaction))?\s*;?\s*$/i
/** What --jobs keeps on one job (below); the reduced search's own doubts are engine/doubt.ts's. */
const PEEKS = /pg_try_advisory|pg_locks|pg_stat_activity|pg_blocking_pids|txid_|pg_current_xact|pg_xact_status|pg_snapshot|pg_export_snapshot|set\s+transaction\s+snapshot/i
/**
 * Whether a step's SQL may touch what the whole database (or cluster) shares, which race explore --jobs cannot give
 * each job its own of: advisory keys (taken, tried or let go), the lock and activity views and the functions behind
 * them, snapshots and transaction status, database-level settings. Several jobs' trials would see each other there.
 */
export function sharesDatabase(sql: string): boolean {
  return PEEKS.test(sql) || SHARED.test(sql)
}
const SHARED = /advisory|pg_lock_status|pg_stat_get_activity|pg_stat_|pg_blocking_pids|pg_safe_snapshot|pg_current_snapshot|pg_notify|\bnotify\b|\blisten\b|alter\s+database|alter\s+role|alter\s+system|pg_database|pg_roles|pg_authid|lo_\w+\s*\(|dblink|pg_prepared_xacts|prepare\s+transaction/i

/** Setup SQL that defines code the server runs for a step (whose SQL then need not name what that code touches). */
export const DEFINES_CODE = /\bcreate\s+(or\s+replace\s+)?(function|procedure|trigger|constraint\s+trigger|rule|view|materialized\s+view|extension|aggregate|operator|cast|event\s+trigger|server|foreign\s+table)\b/i

/** Whether a step seen `before` and `after` it ended the transaction it ran in (after it: none, or another). */
export function endsTx(before: Seen, after: Seen | undefined): boolean {
  return before.inTx && (!after?.inTx || after.xact !== before.xact)
}

/** Relation lock modes of reads and row changes; anything stronger (DDL, LOCK TABLE, VACUUM) is unclassified. */
const ROWS = new Set(['AccessShareLock', 'RowShareLock', 'RowExclusiveLock'])

/**
 * The footprint of a step of SQL `sql` from its session's backend before and after it (undefined: not seen).
 * `serializable`: some session of the trial holds SIRead locks (SSI orders reads and writes against each other).
 */
export function touched(before: Seen | undefined, after: Seen | undefined, sql: string, serializable = false): Touched {
  if (!before || !after) return 'all'
  if (!before.inTx && !after.inTx) return sql.trim() === '' ? { reads: [], writes: [] } : 'all'
  const ended = endsTx(before, after)
  if (ended && (after.inTx || !LONE_END.test(sql))) return 'all'
  // Tables the transaction has touched (its locks, held to its end), those it changed or locked rows of, and what
  // is seen by others at once whatever the transactions: sequences (nextval) and advisory keys.
  const seen = new Set<string>()
  const changed = new Set<string>()
  const atOnce = new Set<string>()
  let ssi = serializable
  for (const [type, mode, granted, rel, kind] of [...before.locks, ...after.locks]) {
    if (!granted) return 'all'
    if (type === 'virtualxid' || type === 'transactionid') continue
    if (rel === '?') return 'all'
    if (mode === 'SIReadLock' && rel) {
      ssi = true
      seen.add(`rel:${rel}`)
    } else if (type === 'relation') {
      if (!ROWS.has(mode)) return 'all'
      if (kind === 'S') atOnce.add(`rel:${rel}`)
      else {
        seen.add(`rel:${rel}`)
        if (mode !== 'AccessShareLock') changed.add(`rel:${rel}`)
      }
    }
    // Every advisory key is one resource: keys are often made from a value fresh in each trial (the user), so one
    // trial's key cannot be told apart from another's; footprints are compared across trials.
    else if (type === 'advisory') atOnce.add('advisory')
    else return 'all'
  }
  if (ended) {
    // A commit (or rollback) makes what the transaction changed visible, and lets go of its advisory keys.
    if (ssi) return 'all'
    if (!before.xid) return { reads: [], writes: [...atOnce] }
    const writes = new Set([...changed, ...atOnce, 'snapshot'])
    return { reads: [...seen].filter((r) => !writes.has(r)), writes: [...writes] }
  }
  // Within a transaction, what it changes is seen by no other session until it commits: its tables are read (what
  // others commit there matters to it), not written. Under SSI a change is ordered against others' reads: written.
  // But two transactions that change (or lock: FOR UPDATE, SKIP LOCKED, NOWAIT, a foreign key's check) rows of one
  // table do not commute: on the same row, whichever comes first takes its lock and the other waits, fails (NOWAIT,
  // 40001 at REPEATABLE READ) or skips it. A run where they did not meet shows no wait, so rows are not told apart:
  // changing rows of T writes 'rows:T', which every other change of T's rows meets (issue 38's soundness harness).
  const writes = new Set([...atOnce, ...(ssi ? changed : []), ...[...changed].map((r) => `rows:${r.slice('rel:'.length)}`)])
  const reads = [...seen].filter((r) => !writes.has(r))
  // A transaction that keeps a snapshot after this step (REPEATABLE READ, SERIALIZABLE; a driver's open portal at READ
  // COMMITTED too) may have taken it in this step: which commits came before matters to it. Not only when the
  // snapshot is new: one kept from before (a catalog lookup, a portal) does not show that this step took none.
  if (after.xmin) reads.push('snapshot')
  return { reads, writes: [...writes] }
}
