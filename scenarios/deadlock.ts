// deadlock (advisory §9): s1 takes account a's key then b's, s2 takes b's then a's: a deadlock. PostgreSQL
// detects it and fails one with deadlock_detected (40P01); the other commits: prevented. The victim is made
// deterministic as PostgreSQL's own isolation specs do: s2's deadlock_timeout is short, s1's long, so s2
// runs the deadlock check first and is the one cancelled. --ordered: both take the keys in numeric order
// (the article's sorted()), s2 simply waits for s1: serialized, no deadlock.
import { defineScenario, expectBy, type Params, type SessionSpec, type StepCtx } from '../src/scenario.js'
import { key } from './_fixtures/locks.js'

const accounts = `create table accounts (id text primary key, balance int not null)`
const seed = `insert into accounts values ('a', 100), ('b', 100)`

/** The two keys a transfer from `src` to `dst` locks, in the order this session takes them. */
function keys(p: Params, ctx: StepCtx, src: string, dst: string): [string, string] {
  const ks = [key(`account:${src}`, ctx), key(`account:${dst}`, ctx)]
  if (p.ordered) ks.sort((x, y) => (BigInt(x) < BigInt(y) ? -1 : BigInt(x) > BigInt(y) ? 1 : 0))
  return ks as [string, string]
}

function transfer(p: Params, src: string, dst: string, deadlockTimeout: string): SessionSpec {
  const shown = p.ordered ? 'the smaller key' : `key('account:${src}')`
  const shown2 = p.ordered ? 'the larger key' : `key('account:${dst}')`
  return {
    connection: { deadlock_timeout: deadlockTimeout },
    steps: {
      begin: 'begin',
      first: { sql: `select pg_advisory_xact_lock(${shown})`, run: (sql, ctx) => `select pg_advisory_xact_lock(${keys(p, ctx, src, dst)[0]}::bigint)` },
      second: { sql: `select pg_advisory_xact_lock(${shown2})`, run: (sql, ctx) => `select pg_advisory_xact_lock(${keys(p, ctx, src, dst)[1]}::bigint)` },
      move: `update accounts set balance = balance + case id when '${src}' then -10 else 10 end where id in ('${src}', '${dst}')`,
      commit: 'commit',
    },
  }
}

export default defineScenario({
  id: 'deadlock',
  title: 'two keys in opposite order deadlock (40P01); numeric order does not',
  source: 'advisory-lock article §9',
  story: [
    "s1 moves 10 from account a to b, s2 from b to a; each takes both accounts' advisory keys first.",
    's1 takes a then b, s2 takes b then a: each waits for the other. PostgreSQL detects the cycle and fails one with deadlock_detected (40P01); the other commits.',
    "Which one is not something to rely on (the docs say so); here it is fixed as PostgreSQL's isolation specs fix it: s2's deadlock_timeout is 50ms, s1's 5s, so s2 checks first and is the victim.",
    '--ordered: both take the keys in numeric order (sorted, as the article does): s2 waits for s1, no deadlock.',
    'Invariant: money is neither made nor lost (a + b = 200).',
  ],
  params: {
    ordered: {
      flag: '--ordered',
      description: 'take both keys in numeric order (no deadlock)',
      kind: 'boolean',
      default: false,
    },
  },
  defaultN: 2,
  nRange: [2, 2],
  isolation: () => 'read committed',
  setup: [accounts, seed],
  sessions: (p) => ({ s1: transfer(p, 'a', 'b', '5s'), s2: transfer(p, 'b', 'a', '50ms') }),
  defaultSchedule: 'lockstep',
  invariant: {
    description: () => 'a + b = 200 (no money made or lost)',
    query: (sql) => sql`select sum(balance)::int as total, string_agg(id || '=' || balance, ' ' order by id) as balances from accounts`,
    observed: (rows) => `${rows[0]?.balances}`,
    holds: (rows) => Number(rows[0]?.total) === 200,
  },
  expect: (ctx) =>
    expectBy({
      lockstep: [ctx.params.ordered ? 'serialized' : 'prevented'],
      barrier: ctx.params.ordered ? ['serialized', 'clean'] : ['prevented', 'serialized', 'clean'],
    })(ctx),
  checks: [{ label: 'ordered', params: { ordered: true } }],
})
