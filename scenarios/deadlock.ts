// deadlock (advisory-locks §9): s1 takes account a's key then b's, s2 takes b's then a's: a deadlock.
// PostgreSQL detects it and fails one with deadlock_detected (40P01); the other commits. The victim is made
// deterministic as PostgreSQL's own isolation specs do: s2's deadlock_timeout is short, s1's long, so s2
// runs the deadlock check first and is the one cancelled. --ordered: both take the keys in numeric order
// (the article's sorted()): s2 simply waits for s1, no deadlock.
import { advisoryKey, clean, defineScenario, prevented, serialized, type Bind, type BindCtx, type Params, type SessionSpec } from '../src/scenario.js'

/** The two keys a transfer from `src` to `dst` locks, in the order this session takes them. */
function keys(p: Params, ctx: BindCtx, src: string, dst: string): [bigint, bigint] {
  const ks = [advisoryKey(`account:${src}`, ctx.user), advisoryKey(`account:${dst}`, ctx.user)]
  if (p.ordered) ks.sort((x, y) => (x < y ? -1 : x > y ? 1 : 0))
  return ks as [bigint, bigint]
}

function transfer(p: Params, src: string, dst: string, deadlockTimeout: string): SessionSpec {
  const key = (i: 0 | 1, describe: string): Bind => ({ describe, value: (ctx) => keys(p, ctx, src, dst)[i] })
  return {
    connection: { deadlock_timeout: deadlockTimeout },
    binds: {
      first: key(0, p.ordered ? 'the smaller of the two account keys' : `sha256('account:${src}:' || user), first 8 bytes`),
      second: key(1, p.ordered ? 'the larger of the two account keys' : `sha256('account:${dst}:' || user), first 8 bytes`),
    },
    steps: {
      begin: 'begin',
      first: 'select pg_advisory_xact_lock(:first)',
      second: 'select pg_advisory_xact_lock(:second)',
      move: `update accounts set balance = balance + case id when '${src}' then -10 else 10 end where id in ('${src}', '${dst}')`,
      commit: 'commit',
    },
  }
}

const BOTH = { s1: 'committed', s2: 'committed' }

export default defineScenario({
  id: 'deadlock',
  title: 'two keys in opposite order deadlock (40P01); numeric order does not',
  source: { article: 'advisory-locks', section: '9' },
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
  sessionCount: { default: 2, min: 2, max: 2 },
  isolation: 'read committed',
  setup: [`create table accounts (id text primary key, balance int not null)`, `insert into accounts values ('a', 100), ('b', 100)`],
  sessions: ({ params }) => ({ s1: transfer(params, 'a', 'b', '5s'), s2: transfer(params, 'b', 'a', '50ms') }),
  defaultSchedule: 'lockstep',
  invariant: {
    description: 'a + b = 200 (no money made or lost)',
    sql: `select sum(balance) = 200 as held, string_agg(id || '=' || balance, ' ' order by id) as balances from accounts`,
    observed: (r) => `${r.balances}`,
  },
  documented: {
    postgres: {
      lockstep: (v) =>
        v.params.ordered
          ? serialized('both take the smaller key first: s2 waits for s1', BOTH)
          : prevented("deadlock detected: s2's deadlock_timeout (50ms) runs out first, so s2 is cancelled", { s1: 'committed', s2: '40P01' }),
      serial: clean('one transfer after the other', BOTH),
      barrier: (v) =>
        v.params.ordered
          ? [serialized('s2 waited for s1', BOTH), clean('they did not overlap', BOTH)]
          : [prevented('deadlock detected: s2 is cancelled', { s1: 'committed', s2: '40P01' }), serialized('one waited for the other, no cycle', BOTH), clean('they did not overlap', BOTH)],
    },
  },
  checks: [{ label: 'ordered', params: { ordered: true } }],
  unavailable: { mysql: "its victim is chosen by per-session deadlock_timeout, which InnoDB does not have (it detects at once: row-deadlock shows InnoDB's deadlocks)" },
})
