// pool-isolation-leak (isolation-levels article, common pitfall 1): borrower A sets SERIALIZABLE on a pooled
// connection at session level and hands it back; borrower B, who asked for nothing, runs at SERIALIZABLE
// (violated). --form transaction (BEGIN ISOLATION LEVEL ...) or --form discard (DISCARD ALL on release, as a
// pooler's reset query does) leave B at the server default (held).
//
// Without a pooler one session plays both borrowers on its one connection. Through a real one (--pooler
// pgbouncer, a pool of one server connection) A and B are two clients: in transaction mode A's SET stays on the
// server connection and B inherits it; --reset-query-always makes the pool reset the connection after every
// transaction, so A's SET is gone before A's own transaction (A runs at READ COMMITTED: the deterministic
// breakage PgBouncer's manual promises); in session mode the reset runs when A disconnects, and B is clean.
import { anomaly, clean, defineScenario, levelParam, type DocCtx, type Documented, type SessionSpec, type Variant } from '../src/scenario.js'
import type { Level } from '../src/levels.js'

/** A borrower's work: it records the level its transaction really runs at. */
const work = (borrower: string) => `insert into borrowers (borrower, level) select '${borrower}', current_setting('transaction_isolation') returning level`

const leaks = (v: Variant) => v.params.form === 'session' && v.params.isolation !== 'read committed'

/** A's SET SESSION CHARACTERISTICS is reset before A's own transaction (server_reset_query_always). */
const resetUnderA = (v: Variant) => Boolean(v.pool?.resetAlways) && v.params.form === 'session'

function throughPool(v: DocCtx): Documented | Documented[] {
  const both = { a: 'committed', b: 'committed' }
  // The application's own DISCARD ALL also resets the search_path the pool gives the run: not documented.
  if (v.params.form === 'discard') return []
  if (!leaks(v)) return clean('B runs at the default level', both)
  if (v.pool!.mode === 'session') return clean("session mode: A's disconnect makes the pool run its reset query (DISCARD ALL) before B gets the connection", both)
  if (v.pool!.resetAlways) return clean("the pool resets the connection after every transaction: after A's SET too, so A itself runs at the default", both)
  const leak = anomaly("SET SESSION CHARACTERISTICS stays with the server connection: B, lent it next, inherits A's level", both)
  // A pooler of unknown size may lend B another connection.
  return v.pool!.size === null ? [leak, clean('the pool lent B another connection', both)] : leak
}

// Not a race: one connection, one borrower after the other, so every schedule (serial included) leaks.
const outcome = (v: DocCtx) =>
  v.pool
    ? throughPool(v)
    : leaks(v)
      ? anomaly("SET SESSION CHARACTERISTICS stays with the connection: B inherits A's level", { conn: 'committed' })
      : clean('B runs at the default level', { conn: 'committed' })

/** A's steps: how it sets its level, its work, and (--form discard) the DISCARD ALL on release. */
function aSteps(params: Variant['params']): SessionSpec['steps'] {
  const steps: SessionSpec['steps'] =
    params.form === 'transaction'
      ? { a_begin: `begin isolation level ${params.isolation}` }
      : { a_set: `set session characteristics as transaction isolation level ${params.isolation}`, a_begin: 'begin' }
  Object.assign(steps, { a_work: work('A'), a_commit: 'commit' })
  if (params.form === 'discard') steps.release = 'discard all'
  return steps
}

const bSteps = { b_begin: 'begin', b_work: work('B'), b_commit: 'commit' }

export default defineScenario({
  id: 'pool-isolation-leak',
  title: 'an isolation level set on a pooled connection leaks to the next borrower',
  source: { article: 'isolation-levels', section: 'Common pitfalls: 1. isolation level leaking through a connection pool' },
  story: [
    'One pooled connection, two borrowers one after the other (a pool of one, so B gets the connection A returned).',
    "A sets the level at session level (SET SESSION CHARACTERISTICS, what a driver's set_isolation_level does),",
    "does its work, commits, and hands the connection back. B just begins: it runs at A's level, silently.",
    '--form transaction: A writes BEGIN ISOLATION LEVEL ...; --form discard: the pool runs DISCARD ALL on release.',
    "Each borrower records the level it really ran at; the invariant compares B's with the default of a fresh connection.",
  ],
  params: {
    isolation: {
      flag: '--isolation <level>',
      description: 'the level borrower A asks for',
      kind: 'choice',
      default: 'serializable',
      choices: ['read committed', 'repeatable read', 'serializable'],
    },
    form: {
      flag: '--form <form>',
      description: 'how A sets its level: session (the bug), transaction (BEGIN ISOLATION LEVEL), discard (DISCARD ALL on release)',
      kind: 'choice',
      default: 'session',
      choices: ['session', 'transaction', 'discard'],
    },
  },
  sessionCount: { default: 1, min: 1, max: 1 },
  // The connection's first transaction is A's, at the level A asked for (through a pool that resets after
  // every transaction, at the default: its SET was reset). B's level is what the invariant checks.
  isolation: (v) => (v.pool ? { a: resetUnderA(v) ? 'read committed' : levelParam(v), b: null } : levelParam(v)) as Level | Record<string, Level | null>,
  setup: [`create table borrowers (borrower text primary key, level text not null)`],
  sessions: ({ params, pool }): Record<string, SessionSpec> =>
    pool ? { a: { steps: aSteps(params) }, b: { steps: bSteps } } : { conn: { steps: { ...aSteps(params), ...bSteps } } },
  // Through a pooler: A, then B, each a client of its own.
  permutation: ({ params, pool }) =>
    pool
      ? [...Object.keys(aSteps(params)).map((k) => `a.${k}`), ...Object.keys(bSteps).map((k) => `b.${k}`)].join(' ')
      : Object.keys({ ...aSteps(params), ...bSteps })
          .map((k) => `conn.${k}`)
          .join(' '),
  defaultSchedule: 'lockstep',
  invariant: {
    description: "borrower B ran at the pool's default level (that of a fresh connection)",
    sql: `select b = fresh as held, a, b, fresh
  from (select (select level from borrowers where borrower = 'A') as a, (select level from borrowers where borrower = 'B') as b,
               current_setting('default_transaction_isolation') as fresh) x`,
    observed: (r) => `A ran at ${r.a ?? '?'}, B ran at ${r.b ?? '?'}, a fresh connection gets ${r.fresh}`,
  },
  documented: { postgres: { lockstep: outcome, serial: outcome } },
  pooled: { size: 1, modes: ['transaction', 'session'] },
  checks: [
    { label: 'per transaction', params: { form: 'transaction' } },
    { label: 'discard all', params: { form: 'discard' } },
    { label: 'reset query always', pool: { resetAlways: true } },
    { label: 'session mode', pool: { mode: 'session' } },
  ],
  unavailable: { mysql: 'not written for InnoDB yet (SET SESSION TRANSACTION ISOLATION LEVEL leaks the same way there; COM_RESET_CONNECTION is its DISCARD ALL)' },
})
