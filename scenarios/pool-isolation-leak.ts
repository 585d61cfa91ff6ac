// pool-isolation-leak (isolation article, よくある間違い 1): borrower A sets SERIALIZABLE on a pooled connection
// at session level and hands it back; borrower B, who asked for nothing, runs at SERIALIZABLE (violated).
// --form transaction (BEGIN ISOLATION LEVEL ...) or --form discard (DISCARD ALL on release, as a pooler's
// reset query does) leave B at the server default (held).
import { defineScenario, expectBy, type SessionSpec } from '../src/scenario.js'
import { level } from './_fixtures/isolation.js'

const kept = `with r as (select current_setting('transaction_isolation') as level)
insert into borrowers (borrower, level) select :borrower, level from r returning level`

const work = (borrower: string) => ({
  sql: kept.replace(':borrower', `'${borrower}'`),
  run: (sql: import('postgres').Sql) => sql.unsafe(kept.replace(':borrower', `'${borrower}'`)),
})

export default defineScenario({
  id: 'pool-isolation-leak',
  title: "an isolation level set on a pooled connection leaks to the next borrower",
  source: 'isolation-levels article, よくある間違い 1. コネクションプールでの分離レベルの漏洩',
  story: [
    'One pooled connection, two borrowers one after the other (a pool of one, so B gets the connection A returned).',
    "A sets the level at session level (SET SESSION CHARACTERISTICS, what a driver's set_isolation_level does),",
    'does its work, commits, and hands the connection back. B just begins: it runs at A\'s level, silently.',
    '--form transaction: A writes BEGIN ISOLATION LEVEL ...; --form discard: the pool runs DISCARD ALL on release.',
    'Each borrower records the level it really ran at; the invariant compares B\'s with the default of a fresh connection.',
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
  defaultN: 1,
  nRange: [1, 1],
  isolation: (p) => `A: ${level(p)}${p.form === 'transaction' ? ' (per transaction)' : ' (session)'}; B: the default`,
  setup: [`create table borrowers (borrower text primary key, level text not null)`],
  sessions: (p) => {
    const steps: SessionSpec['steps'] =
      p.form === 'transaction'
        ? { a_begin: `begin isolation level ${level(p)}` }
        : { a_set: `set session characteristics as transaction isolation level ${level(p)}`, a_begin: 'begin' }
    Object.assign(steps, { a_work: work('A'), a_commit: 'commit' })
    if (p.form === 'discard') steps.release = 'discard all'
    Object.assign(steps, { b_begin: 'begin', b_work: work('B'), b_commit: 'commit' })
    return { conn: { steps } }
  },
  defaultSchedule: 'lockstep',
  invariant: {
    description: () => "borrower B ran at the pool's default level (that of a fresh connection)",
    query: (sql) =>
      sql`select (select level from borrowers where borrower = 'A') as a, (select level from borrowers where borrower = 'B') as b,
                 current_setting('default_transaction_isolation') as fresh`,
    observed: ([r]) => `A ran at ${r.a}, B ran at ${r.b}, a fresh connection gets ${r.fresh}`,
    holds: ([r]) => r.b === r.fresh,
  },
  // Not a race: one connection, one borrower after the other, so every schedule (serial included) leaks.
  expect: (ctx) => {
    const v = ctx.params.form === 'session' && level(ctx.params) !== 'read committed' ? 'anomaly' : 'clean'
    return expectBy({ lockstep: [v], barrier: [v], serial: [v] })(ctx)
  },
  checks: [
    { label: 'per transaction', params: { form: 'transaction' } },
    { label: 'discard all', params: { form: 'discard' } },
  ],
})
