// pool-isolation-leak (isolation-levels article, common pitfall 1): borrower A sets SERIALIZABLE on a pooled
// connection at session level and hands it back; borrower B, who asked for nothing, runs at SERIALIZABLE
// (violated). --form transaction (BEGIN ISOLATION LEVEL ...) or --form discard (DISCARD ALL on release, as a
// pooler's reset query does) leave B at the server default (held).
import { anomaly, clean, defineScenario, levelParam, type SessionSpec, type Variant } from '../src/scenario.js'

/** A borrower's work: it records the level its transaction really runs at. */
const work = (borrower: string) => `insert into borrowers (borrower, level) select '${borrower}', current_setting('transaction_isolation') returning level`

// Not a race: one connection, one borrower after the other, so every schedule (serial included) leaks.
const outcome = (v: Variant) =>
  v.params.form === 'session' && v.params.isolation !== 'read committed'
    ? anomaly("SET SESSION CHARACTERISTICS stays with the connection: B inherits A's level", { conn: 'committed' })
    : clean('B runs at the default level', { conn: 'committed' })

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
  // The connection's first transaction is A's, at the level A asked for.
  isolation: levelParam,
  setup: [`create table borrowers (borrower text primary key, level text not null)`],
  sessions: ({ params }) => {
    const steps: SessionSpec['steps'] =
      params.form === 'transaction'
        ? { a_begin: `begin isolation level ${params.isolation}` }
        : { a_set: `set session characteristics as transaction isolation level ${params.isolation}`, a_begin: 'begin' }
    Object.assign(steps, { a_work: work('A'), a_commit: 'commit' })
    if (params.form === 'discard') steps.release = 'discard all'
    Object.assign(steps, { b_begin: 'begin', b_work: work('B'), b_commit: 'commit' })
    return { conn: { steps } }
  },
  defaultSchedule: 'lockstep',
  invariant: {
    description: "borrower B ran at the pool's default level (that of a fresh connection)",
    sql: `select b = fresh as held, a, b, fresh
  from (select (select level from borrowers where borrower = 'A') as a, (select level from borrowers where borrower = 'B') as b,
               current_setting('default_transaction_isolation') as fresh) x`,
    observed: (r) => `A ran at ${r.a ?? '?'}, B ran at ${r.b ?? '?'}, a fresh connection gets ${r.fresh}`,
  },
  documented: { postgres: { lockstep: outcome, serial: outcome } },
  checks: [
    { label: 'per transaction', params: { form: 'transaction' } },
    { label: 'discard all', params: { form: 'discard' } },
  ],
  unavailable: { mysql: 'not written for InnoDB yet (SET SESSION TRANSACTION ISOLATION LEVEL leaks the same way there; COM_RESET_CONNECTION is its DISCARD ALL)' },
})
