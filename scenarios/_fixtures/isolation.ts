// The isolation-levels article's family: the --isolation param, the reads table that turns a read into
// evidence the invariant can query, and what PostgreSQL documents for each anomaly at each level.
// Documented = the manual's "Transaction Isolation" chapter (Table 13.1 and 13.2.1-13.2.3), which agrees
// with the PostgreSQL rows of the article's comparison table except at READ UNCOMMITTED (see DOCUMENTED).
import { expectBy, type ExpectCtx, type ParamSpec, type Params, type StepDef, type Verdict } from '../../src/scenario.js'

export const LEVELS = ['read committed', 'repeatable read', 'serializable'] as const
export type Level = (typeof LEVELS)[number]

/** The --isolation param every scenario of this family takes. */
export function isolationParam(def: string = 'read committed', extra: readonly string[] = []): { isolation: ParamSpec } {
  return {
    isolation: {
      flag: '--isolation <level>',
      description: 'isolation level of every session: "read committed", "repeatable read" or serializable',
      kind: 'choice',
      default: def,
      choices: [...extra, ...LEVELS],
    },
  }
}

export const level = (p: Params): string => String(p.isolation)
export const begin = (p: Params): string => `begin isolation level ${level(p)}`

/** What a read returned, kept in the run's schema (rolled back with its transaction, like the read itself). */
export const readsTable = `create table reads (
  session text    not null,
  step    text    not null,
  value   numeric not null,
  primary key (session, step)
)`

/** A read whose result is recorded in `reads` as (session, label) by the same statement (same snapshot). `select` yields one column, value. */
export function recordRead(label: string, select: string): StepDef {
  return {
    sql: `${select}  -- value kept in reads`,
    run: (sql, ctx) =>
      sql.unsafe(`with r as (${select}) insert into reads (session, step, value) select $1, $2, value from r returning value::int as value`, [
        ctx.session,
        label,
      ]),
  }
}

/** The invariant of the read anomalies: what one session read at `a` and at `b`, from the reads table. */
export function readsOf(session: string, a: string, b: string): string {
  return `select (select value::int from reads where session = '${session}' and step = '${a}') as first,
       (select value::int from reads where session = '${session}' and step = '${b}') as second`
}

/** One documented outcome: the verdict and, for prevented, the SQLSTATE that prevents it. */
export interface Documented {
  verdict: Verdict
  sqlstate?: string
  /** Where the manual says so, in a few words. */
  why: string
}

const anomaly = (why: string): Documented => ({ verdict: 'anomaly', why })
const clean = (why: string): Documented => ({ verdict: 'clean', why })
const serialized = (why: string): Documented => ({ verdict: 'serialized', why })
const prevented = (sqlstate: string, why: string): Documented => ({ verdict: 'prevented', sqlstate, why })

const RR_UPDATE = 'RR cannot modify a row changed after its snapshot: 40001 (13.2.2)'
const SER_SSI = 'SSI: rw-dependency cycle, 40001 (13.2.3)'

/** Per scenario and level, with each scenario's default interleaving. Table 13.1 rows noted per scenario. */
export const DOCUMENTED: Record<string, Record<Level, Documented>> = {
  // Table 13.1 dirty read: "Allowed, but not in PG" at READ UNCOMMITTED, not possible above.
  'dirty-read': {
    'read committed': clean('dirty read not possible; RU behaves as RC (13.2)'),
    'repeatable read': clean('dirty read not possible'),
    serializable: clean('dirty read not possible'),
  },
  // Table 13.1 nonrepeatable read: possible at RC only.
  'non-repeatable-read': {
    'read committed': anomaly('each statement sees a new snapshot (13.2.1)'),
    'repeatable read': clean('one snapshot per transaction (13.2.2)'),
    serializable: clean('one snapshot per transaction'),
  },
  // Table 13.1 phantom read: possible at RC; "Allowed, but not in PG" at RR.
  phantom: {
    'read committed': anomaly('each statement sees a new snapshot (13.2.1)'),
    'repeatable read': clean('phantom "allowed, but not in PG" (Table 13.1)'),
    serializable: clean('one snapshot per transaction'),
  },
  // A nonrepeatable read across two rows: the sum of what one transaction read never existed.
  'read-skew': {
    'read committed': anomaly('each statement sees a new snapshot (13.2.1)'),
    'repeatable read': clean('one snapshot per transaction (13.2.2)'),
    serializable: clean('one snapshot per transaction'),
  },
  // Serialization anomaly (Table 13.1) of the read-modify-write kind.
  'lost-update': {
    'read committed': anomaly('the second UPDATE writes its stale value (13.2.1)'),
    'repeatable read': prevented('40001', RR_UPDATE),
    serializable: prevented('40001', RR_UPDATE),
  },
  'lost-update-atomic': {
    'read committed': serialized('the second UPDATE waits, then re-evaluates on the new row (13.2.1)'),
    'repeatable read': prevented('40001', RR_UPDATE),
    serializable: prevented('40001', RR_UPDATE),
  },
  'lost-update-for-update': {
    'read committed': serialized('FOR UPDATE waits, then returns the new row (13.2.1)'),
    'repeatable read': prevented('40001', 'RR cannot lock a row changed after its snapshot: 40001 (13.2.2)'),
    serializable: prevented('40001', 'RR cannot lock a row changed after its snapshot: 40001 (13.2.2)'),
  },
  'lost-update-version': {
    'read committed': clean('WHERE version = v matches nothing; the application retries (article)'),
    'repeatable read': prevented('40001', RR_UPDATE),
    serializable: prevented('40001', RR_UPDATE),
  },
  // Serialization anomaly: possible at RC and RR, not at SERIALIZABLE (Table 13.1; 13.2.3's example).
  'write-skew': {
    'read committed': anomaly('serialization anomaly possible'),
    'repeatable read': anomaly('serialization anomaly possible (13.2.2)'),
    serializable: prevented('40001', SER_SSI),
  },
  'predicate-read': {
    'read committed': anomaly('serialization anomaly possible'),
    'repeatable read': anomaly('serialization anomaly possible (13.2.2)'),
    serializable: prevented('40001', SER_SSI),
  },
  'predicate-delete': {
    'read committed': anomaly('DELETE finds rows committed before it started (13.2.1)'),
    'repeatable read': clean('DELETE sees only the transaction snapshot (13.2.2)'),
    serializable: clean('DELETE sees only the transaction snapshot; no cycle'),
  },
}

/** The scenarios `race matrix` runs, in its row order. */
export const MATRIX_IDS = Object.keys(DOCUMENTED)

/** A scenario's expectation from DOCUMENTED; READ UNCOMMITTED is documented as READ COMMITTED. */
export function documented(id: string, p: Params): Documented {
  const lv = (level(p) === 'read uncommitted' ? 'read committed' : level(p)) as Level
  return DOCUMENTED[id][lv]
}

export function expectDocumented(id: string): (ctx: ExpectCtx) => Verdict[] {
  return (ctx) => expectBy({ lockstep: [documented(id, ctx.params).verdict] })(ctx)
}

/** race check runs the other two levels as well: the whole column of the matrix for this scenario. */
export function otherLevels(def: string = 'read committed'): { label: string; params: Params }[] {
  return LEVELS.filter((l) => l !== def).map((l) => ({ label: l, params: { isolation: l } }))
}
