// The isolation-levels article's family: the --isolation param, and the reads table that turns a read into
// evidence the invariant can query. What each scenario is documented to do lives in the scenario itself.
// "Documented" means PostgreSQL's manual, chapter "Transaction Isolation" (Table 13.1 and 13.2.1-13.2.3).
import { type ParamSpec, type Params } from '../../src/scenario.js'
import { LEVELS, levelsOn, type Level } from '../../src/levels.js'

/** The --isolation param every scenario of this family takes. */
export function isolationParam(def: Level = 'read committed', extra: readonly Level[] = []): { isolation: ParamSpec } {
  return {
    isolation: {
      flag: '--isolation <level>',
      description: 'isolation level of every session: "read committed", "repeatable read" or serializable',
      kind: 'choice',
      default: def,
      choices: [...extra, ...LEVELS],
      // InnoDB's READ UNCOMMITTED reads uncommitted rows: every scenario of the family takes it there.
      choicesOn: { mysql: levelsOn('mysql') },
    },
  }
}

export const begin = (p: Params): string => `begin isolation level ${p.isolation}`

/** What a read returned, kept in the run's schema (rolled back with its transaction, like the read itself). */
export const readsTable = `create table reads (
  session text    not null,
  step    text    not null,
  value   numeric not null,
  primary key (session, step)
)`

/** A read whose result is recorded in `reads` as (session, label) by the same statement (same snapshot). `select` yields one column, value. */
export function recordRead(label: string, select: string): string {
  return `with r as (${select})
insert into reads (session, step, value) select :session, '${label}', value from r returning value::int as value`
}

/** What one session read at `a` and at `b` (NULL when a read is missing), as columns first and second. */
export function readsOf(session: string, a: string, b: string): string {
  return `(select value::int from reads where session = '${session}' and step = '${a}') as first,
       (select value::int from reads where session = '${session}' and step = '${b}') as second`
}

/** Manual references used by the documented outcomes of this family. */
export const RR_UPDATE = 'REPEATABLE READ cannot modify a row changed after its snapshot: 40001 (13.2.2)'
export const SER_SSI = 'SSI: a read/write dependency cycle, 40001 (13.2.3)'

/** race check runs the other levels as well: the whole column of the matrix for this scenario. */
export function otherLevels(def: Level = 'read committed', extra: readonly Level[] = []): { label: string; params: Params }[] {
  return [...extra, ...LEVELS].filter((l) => l !== def).map((l) => ({ label: l, params: { isolation: l } }))
}
