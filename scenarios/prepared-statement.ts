// prepared-statement (advisory-locks §6, the pooler's feature table): a prepared statement lives on the server
// connection (backend) that prepared it. On its own connection a client finds its statement and another client
// does not (26000 invalid_sql_statement_name). Through PgBouncer 1.18 in transaction mode the clients share
// server connections: c2, lent the connection c1 prepared on, runs c1's statement as if it were its own, and
// c1, lent another one, finds its own statement missing (26000). The same happens to the protocol-level named
// statements a driver prepares (postgres.js does by default; race's sessions use unnamed ones through a pooler).
import { anomaly, defineScenario, prevented, type DocCtx, type Documented } from '../src/scenario.js'

/** The statement c1 prepares: it writes who prepared it and who ran it. */
const PREPARE = `prepare add_request(text) as
  insert into executions (prepared_by, executed_by) values ('c1', $1) returning prepared_by`

const own = prevented("each client's statement is on its own backend: c2 has none (26000), c1 runs its own", { c1: 'committed', c2: '26000' })
const borrowed = anomaly("c2, lent the server connection c1 prepared on, runs c1's statement; c1, lent another one, finds none (26000)", { c1: '26000', c2: 'committed' })
const both = anomaly("c2 runs c1's statement on the connection c1 prepared on; c1 then gets that same connection back and runs its own", { c1: 'committed', c2: 'committed' })

function lockstep(v: DocCtx): Documented | Documented[] {
  if (!v.pool || v.pool.mode === 'session') return own
  if (v.pool.size === 1) return both
  return v.pool.size === null ? [borrowed, own] : borrowed
}

// One client after another: through a transaction-mode pool c2 is lent the (only) connection c1 used.
function serial(v: DocCtx): Documented | Documented[] {
  if (!v.pool || v.pool.mode === 'session') return own
  return v.pool.size === null ? [both, own] : both
}

export default defineScenario({
  id: 'prepared-statement',
  title: "a prepared statement belongs to a server connection: through a transaction pooler it is missing, or another client's",
  source: { article: 'advisory-locks', section: '6' },
  story: [
    'c1 prepares add_request (SQL PREPARE: a named statement on the backend that runs it) and commits.',
    'c2, another client, begins and executes add_request; then c1 begins again and executes its own add_request.',
    'Each on its own connection: c2 has no such statement (26000 invalid_sql_statement_name), c1 runs its own.',
    "Through PgBouncer in transaction mode (--pooler pgbouncer): c2's transaction is lent the connection c1 prepared on,",
    "so c2 runs c1's statement; c1, lent another connection meanwhile, finds its own statement missing (26000).",
    'PgBouncer 1.18 tracks no prepared statements (1.21 added protocol-level ones): drivers that prepare by default need prepare: false.',
    "Session mode (--pool-mode session): each client keeps its connection; the reset query's DEALLOCATE ALL drops the statement on disconnect.",
  ],
  params: {},
  sessionCount: { default: 2, min: 2, max: 2 },
  isolation: 'read committed',
  setup: [`create table executions (prepared_by text not null, executed_by text not null)`],
  // Each in a transaction, so that a pooler keeps the client on one server connection and race sees which.
  sessions: () => ({
    c1: { steps: { begin: 'begin', prepare: PREPARE, commit: 'commit', again: 'begin', run: `execute add_request('c1')`, done: 'commit' } },
    c2: { steps: { begin: 'begin', run: `execute add_request('c2')`, commit: 'commit' } },
  }),
  // c2's transaction is open when c1 begins again, so a pool lends c1 another connection; a pool of one
  // cannot, and c1 begins again after c2 commits.
  permutation: ({ pool }) =>
    pool?.size === 1
      ? 'c1.begin c1.prepare c1.commit c2.begin c2.run c2.commit c1.again c1.run c1.done'
      : 'c1.begin c1.prepare c1.commit c2.begin c2.run c1.again c1.run c2.commit c1.done',
  defaultSchedule: 'lockstep',
  invariant: {
    description: "every execution ran the executing client's own prepared statement",
    sql: `select count(*) filter (where prepared_by <> executed_by) = 0 as held,
       coalesce(string_agg(executed_by || ' ran ' || prepared_by || '''s', ', ' order by executed_by), 'nothing ran') as runs
  from executions`,
    observed: (r) => String(r.runs),
  },
  documented: { postgres: { lockstep, serial } },
  pooled: { size: 2, modes: ['transaction', 'session'] },
  checks: [{ label: 'session mode', pool: { mode: 'session' } }],
  unavailable: { mysql: "not written for InnoDB: it shows what a PostgreSQL pooler (PgBouncer) does with a backend's prepared statements, and race runs PgBouncer only in front of PostgreSQL" },
})
