// What the locks a step leaves behind cannot show, for race explore's reduced search (footprint.ts gives a step's
// footprint from its session's locks; this file says when those locks may miss what the step read or wrote, and
// the step is then unclassified: 'all', it conflicts with every step).
//
// Locks miss what runs out of sight of the statement: code the server runs for it (triggers, rules, a view's or a
// default's functions, a deferred constraint at COMMIT), locks given back before the step ends (a subtransaction
// rolled back: an EXCEPTION block, ROLLBACK TO SAVEPOINT), and state that is read without any lock (the lock table
// and activity through functions, snapshots and transaction status, sequences' currval, notifications, large
// objects, another connection opened from inside the server). So, once per trial after its setup (and again after
// a step that may have committed catalog changes), control reads from the catalogs:
//
//  - tainted relations: a table with a trigger of its own (the internal ones of a foreign key that is not
//    deferrable run at the end of the statement and keep their locks), with a rule, a foreign table, and any
//    relation whose stored expressions (defaults, generated columns, checks, index expressions and predicates,
//    policies, a view's query, a trigger's WHEN) call a user routine or operator or a built-in of the list below.
//    The functions are read from the stored expression trees (pg_depend does not record built-ins);
//  - relations under a deferrable constraint or constraint trigger (both sides of a deferrable foreign key): at
//    COMMIT the server runs checks and triggers whose locks come after the last look;
//  - the names of every user routine (oid >= 16384: the run's functions, extensions' such as dblink) and operator
//    in a schema the sessions' role may use;
//  - whether any user cast with a function, or a domain whose check calls such a routine, exists: these run
//    without their name in the text or a table of their own, so every step is unclassified.
//
// A step is then 'all' when its transaction holds a lock on a tainted relation or on anything in pg_catalog,
// information_schema or pg_toast (a view over pg_locks or pg_stat_activity locks those views); when it ends a
// transaction that holds a lock on a relation under a deferrable constraint; when its text names a user routine
// or operator, a built-in that observes other sessions or shared state without a lock (SHARED below, surveyed from
// PostgreSQL 15's and 18's pg_proc: volatile and stable built-ins), runs code or SQL given as text (DO, EXECUTE of
// a prepared statement, FETCH/MOVE of a cursor, query_to_xml), or is NOTIFY/LISTEN, SET TRANSACTION SNAPSHOT or
// ROLLBACK TO; when a lock its transaction held before is gone after it (a subtransaction rolled back, a
// session-level advisory lock let go); and every later step of a transaction where that happened. Names are
// matched as words of the text, in any case, strings and comments included: a match that is not a call only adds
// conflicts.
import type { Driver } from '../db/driver.js'
import { bareWords, statements } from '../lex.js'
import { endsTx, LONE_END, type Seen, type Touched } from './footprint.js'

/**
 * Built-ins that read what other sessions do or shared state, without a lock that pg_locks would show: the lock
 * table and activity, snapshots and transaction ids and status, sequences' per-session values, advisory try-locks
 * and unlocks, notifications, large objects, sizes (which grow with others' uncommitted rows), WAL positions,
 * replication, files, other backends (cancel, terminate), and built-ins that run SQL given as text. Names, no
 * word boundaries: `^(...)$` against pg_proc, a word of a step's text.
 */
export const SHARED = [
  'pg_lock_status', 'pg_locks', 'pg_blocking_pids', 'pg_safe_snapshot_blocking_pids', 'pg_isolation_test_session_is_blocked',
  'pg_stat\\w*', 'pg_statio\\w*', 'pg_backend_memory_contexts', 'pg_get_backend_memory_contexts', 'pg_log_backend_memory_contexts', 'pg_get_shmem_allocations',
  'pg_prepared_xacts?', 'pg_get_multixact_members', 'pg_last_committed_xact', 'pg_xact_\\w*',
  'txid_\\w*', 'pg_current_xact_id\\w*', 'pg_current_snapshot', 'pg_snapshot_\\w*', 'pg_visible_in_snapshot', 'pg_export_snapshot',
  'pg_try_advisory\\w*', 'pg_advisory_unlock\\w*',
  'currval', 'lastval', 'pg_sequence_last_value',
  'pg_notify', 'pg_listening_channels', 'pg_notification_queue_usage',
  'lo_\\w+', 'loread', 'lowrite', 'be_lo_\\w+',
  'pg_\\w*_size', 'pg_current_wal\\w*', 'pg_last_wal\\w*', 'pg_last_xact_replay_timestamp', 'pg_control_\\w+', 'pg_logical_\\w+', 'pg_replication_\\w+',
  'pg_ls_\\w+', 'pg_read_\\w*file\\w*', 'pg_stat_file',
  'pg_cancel_backend', 'pg_terminate_backend', 'pg_signal_backend',
  'query_to_xml\\w*', 'cursor_to_xml\\w*', 'table_to_xml\\w*', 'schema_to_xml\\w*', 'database_to_xml\\w*', 'ts_stat', 'ts_rewrite',
  'dblink\\w*',
].join('|')

/** In a step's text: SHARED as words; ages of transaction ids, system columns that name transactions; statements. */
const SHARED_TEXT = new RegExp(
  [
    `(?<![\\w$])(?:${SHARED})(?![\\w$])`,
    // age(xid), mxid_age(xid): how far the transaction counter others advance has gone; xmin/xmax: who wrote a row.
    '(?<![\\w$])(?:mxid_)?age\\s*\\(',
    '(?<![\\w$])(?:xmin|xmax)(?![\\w$])',
    // NOTIFY, LISTEN, UNLISTEN; SET TRANSACTION SNAPSHOT; ROLLBACK [WORK|TRANSACTION] TO [SAVEPOINT].
    '(?<![\\w$])(?:notify|listen|unlisten|snapshot)(?![\\w$])',
    '(?<![\\w$])rollback(?:\\s+(?:work|transaction))?\\s+to(?![\\w$])',
    // DO [LANGUAGE x] 'code' or $$code$$ (not ON CONFLICT DO NOTHING/UPDATE); EXECUTE a prepared statement; a cursor's FETCH/MOVE.
    "(?<![\\w$])do\\s+(?:language\\s+\\S+\\s+)?(?:[eE]?'|\\$)",
    "(?<![\\w$])do\\s*\\$",
    // (statement-first, after comments or EXPLAIN's words: FETCH FIRST n ROWS of a SELECT is not a cursor's).
    '(?:^|;)\\s*(?:(?:/\\*[\\s\\S]*?\\*/|--[^\\n]*\\n)\\s*)*(?:explain\\s+(?:\\([^)]*\\)\\s*|(?:analy[sz]e|verbose)\\s+)*)?(?:execute|fetch|move)(?![\\w$])',
  ].join('|'),
  'i',
)

/** What the catalogs said once the trial's setup ran (see the top of this file). */
export interface Facts {
  tainted: Set<string>
  deferred: Set<string>
  /** User routines' and operators' names, lower case. */
  routines: Set<string>
  operators: string[]
  /** Something runs user code without its name or a relation of its own (a cast, a domain's check): every step 'all'. */
  everywhere: boolean
  /**
   * Tables whose rows race may tell apart (footprint-rows.ts): by schema-qualified name, their one-column integer
   * primary key (not generated) and their indexes' schema-qualified names.
   */
  plain: Map<string, { key: string; indexes: string[] }>
}

const FACTS = `
with roles as (select distinct a.usesysid as r from pg_catalog.pg_stat_activity a where a.pid operator(pg_catalog.=) any ($2::pg_catalog.int4[])),
ns as (select n.oid, n.nspname from pg_catalog.pg_namespace n where not exists (select from roles where not pg_catalog.has_schema_privilege(roles.r, n.oid, 'USAGE'))),
rel as (select c.oid, (n.nspname operator(pg_catalog.||) '.' operator(pg_catalog.||) c.relname) as name, c.relkind from pg_catalog.pg_class c join ns n on n.oid operator(pg_catalog.=) c.relnamespace
  where c.oid operator(pg_catalog.>=) 16384 and n.nspname operator(pg_catalog.<>) all (array['pg_catalog', 'information_schema', 'pg_toast']::pg_catalog.name[])),
trees (relid, tree) as (
  select d.adrelid, d.adbin from pg_catalog.pg_attrdef d join rel on rel.oid operator(pg_catalog.=) d.adrelid
  union all select k.conrelid, k.conbin from pg_catalog.pg_constraint k join rel on rel.oid operator(pg_catalog.=) k.conrelid
  union all select i.indrelid, i.indexprs from pg_catalog.pg_index i join rel on rel.oid operator(pg_catalog.=) i.indrelid
  union all select i.indrelid, i.indpred from pg_catalog.pg_index i join rel on rel.oid operator(pg_catalog.=) i.indrelid
  union all select p.polrelid, p.polqual from pg_catalog.pg_policy p join rel on rel.oid operator(pg_catalog.=) p.polrelid
  union all select p.polrelid, p.polwithcheck from pg_catalog.pg_policy p join rel on rel.oid operator(pg_catalog.=) p.polrelid
  union all select w.ev_class, w.ev_action from pg_catalog.pg_rewrite w join rel on rel.oid operator(pg_catalog.=) w.ev_class
  union all select w.ev_class, w.ev_qual from pg_catalog.pg_rewrite w join rel on rel.oid operator(pg_catalog.=) w.ev_class
  union all select t.tgrelid, t.tgqual from pg_catalog.pg_trigger t join rel on rel.oid operator(pg_catalog.=) t.tgrelid
  union all select 0::pg_catalog.oid, k.conbin from pg_catalog.pg_constraint k join ns on ns.oid operator(pg_catalog.=) k.connamespace where k.contypid operator(pg_catalog.<>) 0 and k.oid operator(pg_catalog.>=) 16384),
called (relid, key, id) as (
  select t.relid, m[1], m[2]::pg_catalog.oid from trees t, pg_catalog.regexp_matches(t.tree::pg_catalog.text, ':(\\w+) (\\d+)', 'g') m
  where t.tree is not null and m[1] operator(pg_catalog.~) '(funcid|fnoid|op|opno)$'),
bad (relid) as (
  select c.relid from called c where c.key operator(pg_catalog.~) '(op|opno)$' and c.id operator(pg_catalog.>=) 16384
  union select c.relid from called c join pg_catalog.pg_proc p on p.oid operator(pg_catalog.=) c.id
    where c.key operator(pg_catalog.~) '(funcid|fnoid)$' and (p.oid operator(pg_catalog.>=) 16384 or p.proname operator(pg_catalog.~*) $1)),
tainted (relid) as (
  select relid from bad where relid operator(pg_catalog.<>) 0
  union select rel.oid from rel where rel.relkind operator(pg_catalog.=) 'f'
  union select t.tgrelid from pg_catalog.pg_trigger t where not t.tgisinternal or t.tgfoid operator(pg_catalog.>=) 16384
  union select w.ev_class from pg_catalog.pg_rewrite w where w.rulename operator(pg_catalog.<>) '_RETURN'),
deferred (relid) as (
  select k.conrelid from pg_catalog.pg_constraint k where k.condeferrable
  union select k.confrelid from pg_catalog.pg_constraint k where k.condeferrable
  union select t.tgrelid from pg_catalog.pg_trigger t where t.tgdeferrable
  union select t.tgconstrrelid from pg_catalog.pg_trigger t where t.tgdeferrable)
select
  (select coalesce(pg_catalog.json_agg(rel.name), '[]') from rel where rel.oid operator(pg_catalog.=) any (select relid from tainted))::pg_catalog.text as tainted,
  (select coalesce(pg_catalog.json_agg(rel.name), '[]') from rel where rel.oid operator(pg_catalog.=) any (select relid from deferred))::pg_catalog.text as deferred,
  (select coalesce(pg_catalog.json_agg(distinct pg_catalog.lower(p.proname::pg_catalog.text)), '[]') from pg_catalog.pg_proc p join ns on ns.oid operator(pg_catalog.=) p.pronamespace where p.oid operator(pg_catalog.>=) 16384)::pg_catalog.text as routines,
  (select coalesce(pg_catalog.json_agg(distinct o.oprname::pg_catalog.text), '[]') from pg_catalog.pg_operator o join ns on ns.oid operator(pg_catalog.=) o.oprnamespace where o.oid operator(pg_catalog.>=) 16384)::pg_catalog.text as operators,
  (exists (select from bad where relid operator(pg_catalog.=) 0)
    or exists (select from pg_catalog.pg_cast k where k.oid operator(pg_catalog.>=) 16384 and k.castfunc operator(pg_catalog.<>) 0)) as everywhere,
  (select coalesce(pg_catalog.json_agg(pg_catalog.json_build_array(rel.name, a.attname,
      (select pg_catalog.json_agg(n.nspname operator(pg_catalog.||) '.' operator(pg_catalog.||) ic.relname) from pg_catalog.pg_index ix
        join pg_catalog.pg_class ic on ic.oid operator(pg_catalog.=) ix.indexrelid join pg_catalog.pg_namespace n on n.oid operator(pg_catalog.=) ic.relnamespace
        where ix.indrelid operator(pg_catalog.=) c.oid))), '[]')
    from rel join pg_catalog.pg_class c on c.oid operator(pg_catalog.=) rel.oid
    join pg_catalog.pg_index pk on pk.indrelid operator(pg_catalog.=) c.oid and pk.indisprimary and pk.indnatts operator(pg_catalog.=) 1
    join pg_catalog.pg_attribute a on a.attrelid operator(pg_catalog.=) c.oid and a.attnum operator(pg_catalog.=) pk.indkey[0]
    where c.relkind operator(pg_catalog.=) 'r' and c.relpersistence operator(pg_catalog.<>) 't' and not c.relrowsecurity and not c.relhassubclass
      and not c.relispartition and not c.relhasrules and not c.relhastriggers
      and a.atttypid operator(pg_catalog.=) any (array[20, 21, 23]::pg_catalog.oid[]) and a.attgenerated operator(pg_catalog.=) ''
      and pg_catalog.strpos(rel.name, '#') operator(pg_catalog.=) 0
      and not exists (select from pg_catalog.pg_inherits h where h.inhrelid operator(pg_catalog.=) c.oid or h.inhparent operator(pg_catalog.=) c.oid)
      and not exists (select from pg_catalog.pg_index u where u.indrelid operator(pg_catalog.=) c.oid and (u.indisunique or u.indisexclusion) and u.indexrelid operator(pg_catalog.<>) pk.indexrelid)
      and not exists (select from pg_catalog.pg_constraint k where (k.conrelid operator(pg_catalog.=) c.oid or k.confrelid operator(pg_catalog.=) c.oid) and k.contype operator(pg_catalog.=) any (array['f', 'x']::pg_catalog.char[]))
      and c.oid operator(pg_catalog.<>) all (select relid from tainted) and c.oid operator(pg_catalog.<>) all (select relid from deferred))::pg_catalog.text as plain`

/** Reads the catalog facts for the sessions `pids` (their role's schemas), or undefined when not on PostgreSQL. */
export async function readFacts(lab: Driver, pids: readonly number[]): Promise<Facts | undefined> {
  if (lab.engine !== 'postgres' || lab.afterTrial) return undefined
  const own = pids.filter((p) => Number.isInteger(p) && p > 0)
  // Prepared on control (read some four times a run): planning this query cost the server ~4.6 ms of ~9 at every read.
  const [r] = await lab.query(FACTS, [`^(?:${SHARED})$`, `{${own.join(',')}}`], true)
  const list = (x: unknown) => JSON.parse(String(x)) as string[]
  const plain = new Map((JSON.parse(String(r.plain)) as [string, string, string[]][]).map(([t, key, indexes]) => [t, { key, indexes }]))
  return { tainted: new Set(list(r.tainted)), deferred: new Set(list(r.deferred)), routines: new Set(list(r.routines)), operators: list(r.operators), everywhere: Boolean(r.everywhere), plain }
}

/**
 * Statements that change no catalog by themselves: reads and row changes, transaction control, LOCK, SET, SHOW. Code
 * the server runs for them (a trigger, a rule, a function they call) may, which the facts tell (userCode).
 */
const ROWS_ONLY = /^(select|insert|update|delete|merge|with|values|table|begin|start|commit|end|rollback|abort|savepoint|release|lock|set|reset|show)(?![\w$])/i

/**
 * Whether SQL may change a catalog when it commits: a statement that is not ROWS_ONLY, or a query with INTO that is not
 * an INSERT's or a MERGE's (SELECT INTO creates a table). Comments and strings are not read; a false yes costs a read.
 */
export function mayDefine(sql: string): boolean {
  return statements(sql).some((st) => {
    const m = ROWS_ONLY.exec(st)
    if (!m) return true
    const words = bareWords(st).replace(/(?<![\w$])(insert|merge)\s+into(?![\w$])/gi, ' ')
    return /(?<![\w$])into(?![\w$])/i.test(words)
  })
}

const ROLLBACK_TO = /(?<![\w$])rollback(?:\s+(?:work|transaction))?\s+to(?![\w$])/i
const SYSTEM = /^(pg_catalog|information_schema|pg_toast)\./

/** Does `sql` name a user routine or operator, or read shared state (SHARED_TEXT)? */
export function namesDoubt(facts: Pick<Facts, 'routines' | 'operators'>, sql: string): boolean {
  if (SHARED_TEXT.test(sql)) return true
  if (facts.operators.some((o) => sql.includes(o))) return true
  if (facts.routines.size) {
    // Words and quoted identifiers, in lower case: a match that is no call only adds conflicts.
    for (const m of sql.matchAll(/"((?:[^"]|"")+)"|([\p{L}_][\p{L}\p{N}_$]*)/gu)) {
      if (facts.routines.has((m[1] ?? m[2]).replace(/""/g, '"').toLowerCase())) return true
    }
  }
  return false
}

const lockKey = (l: Seen['locks'][number]) => JSON.stringify([l[0], l[1], l[3]])

/**
 * Whether the catalogs may read otherwise once the step of SQL `sql` on backend `pid` (seen `before` and `after` it)
 * is over: it ran outside a transaction, or it ended one that wrote (or came with more than COMMIT/ROLLBACK), and
 * what ran may have changed a catalog: a statement of it (mayDefine), or any statement where `userCode` (the facts know
 * code of the user's that a statement may run). `defining`: the transactions (pid and start) that ran such a
 * statement, added to here; a step that begins one notes it for the step that ends it.
 */
export function catalogMayChange(defining: Set<string>, userCode: boolean, pid: number | undefined, before: Seen | undefined, after: Seen | undefined, sql: string): boolean {
  const may = userCode || mayDefine(sql)
  const tx = before?.inTx ? `${pid}:${before.xact}` : undefined
  if (may && tx) defining.add(tx)
  if (may && after?.inTx && after.xact !== before?.xact) defining.add(`${pid}:${after.xact}`)
  // Catalog changes are seen by control once their transaction commits.
  const ended = before !== undefined && endsTx(before, after)
  if (before !== undefined && !before.inTx && !after?.inTx) return may
  return ended && (before!.xid || !LONE_END.test(sql)) && defining.has(tx!)
}

/**
 * One trial's doubts: the catalog facts (read after its setup, and again after a step that may have committed
 * catalog changes) and the transactions in which a lock was given back. `judge` turns a footprint that locks gave
 * into 'all' where they may miss what the step did.
 */
export class Doubts {
  private facts: Facts | undefined
  private read = false
  /** Transactions (pid and start) in which a held lock went away: every step of theirs from then on is 'all'. */
  private lost = new Set<string>()
  /** Transactions (pid and start) that ran a statement that may change a catalog (mayDefine). */
  private defining = new Set<string>()
  constructor(private readonly lab: Driver) {}

  /** Code of the user's the server may run for a statement (a routine, an operator, a trigger or rule, a cast). */
  private userCode(): boolean {
    const f = this.facts
    return !f || f.everywhere || f.routines.size > 0 || f.operators.length > 0 || f.tainted.size > 0
  }

  /**
   * Called at each quiet moment before the step just run (on backend `pid`) is judged: reads the facts the first
   * time, and again when that step ended a transaction or ran outside one (what it created is then seen by every
   * session) and that transaction may have changed a catalog: one of its statements may (mayDefine), or the facts
   * know code of the user's that a statement may run. Reading them after every commit that wrote cost the server
   * some 3.6 ms a commit (PostgreSQL 15), most of a reduced search's run.
   */
  async settle(pids: readonly number[] | undefined, pid: number | undefined, before: Seen | undefined, after: Seen | undefined, sql: string): Promise<void> {
    const committed = catalogMayChange(this.defining, this.userCode(), pid, before, after, sql)
    if (this.read && !committed) return
    this.read = true
    this.facts = await readFacts(this.lab, pids ?? [])
  }

  /** The catalog facts as last read (undefined: not read, or not PostgreSQL). */
  get known(): Facts | undefined {
    return this.facts
  }

  /** The footprint `fp` of a step of SQL `sql`, its backend `pid` seen before and after it, or 'all' where in doubt. */
  judge(fp: Touched, pid: number, before: Seen | undefined, after: Seen | undefined, sql: string): Touched {
    return judge(this.facts, this.lost, fp, pid, before, after, sql)
  }
}

/**
 * The footprint `fp` (from locks) of a step of SQL `sql` whose backend `pid` was seen `before` and `after` it, under
 * the catalog facts `f` (undefined: not read, every step 'all'), or 'all' where locks may miss what it did. `lost`:
 * the transactions (pid:start) in which a held lock went away, added to here.
 */
export function judge(f: Facts | undefined, lost: Set<string>, fp: Touched, pid: number, before: Seen | undefined, after: Seen | undefined, sql: string): Touched {
  if (!before || !after) return 'all'
  const ended = endsTx(before, after)
  const tx = before.inTx ? `${pid}:${before.xact}` : undefined
  if (tx && lost.has(tx)) return 'all'
  if (before.inTx && !ended) {
    // A lock held before and not after, in the same transaction: a subtransaction rolled back (or a session-level
    // advisory lock let go). What the transaction did under it left no trace: the rest of it is unclassified.
    const left = new Map<string, number>()
    for (const l of after.locks) left.set(lockKey(l), (left.get(lockKey(l)) ?? 0) + 1)
    const gone = before.locks.some((l) => {
      const n = left.get(lockKey(l)) ?? 0
      left.set(lockKey(l), n - 1)
      return n === 0
    })
    if (gone || ROLLBACK_TO.test(sql)) {
      lost.add(tx!)
      return 'all'
    }
  }
  if (fp === 'all' || !f || f.everywhere || namesDoubt(f, sql)) return 'all'
  const rels = [...before.locks, ...after.locks].map((l) => l[3]).filter((r) => r !== '')
  if (rels.some((r) => f.tainted.has(r) || SYSTEM.test(r))) return 'all'
  if (ended && rels.some((r) => f.deferred.has(r))) return 'all'
  return fp
}
