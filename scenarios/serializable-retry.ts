// serializable-retry (isolation-levels article, retrying serialization failures): N transfers between a few
// accounts at SERIALIZABLE, each wrapped in the article's retry loop (whole transaction, exponential backoff
// with jitter, 40001 only). Money is conserved, every transfer is applied once or reported, and the retries
// are counted. SERIALIZABLE and REPEATABLE READ: losers get 40001 and their retry commits (held, prevented).
// READ COMMITTED: the losers wait for the row locks and never fail (held, serialized).
import { clean, defineScenario, levelParam, prevented, replicate, serialized, step, type Variant, type Who } from '../src/scenario.js'
import { begin, isolationParam } from './_shared/isolation.js'

const AMOUNT = 10
const INITIAL = 100

/**
 * How many transfers end committed, from a fact of the server rather than of timing. PostgreSQL raises 40001 in
 * a transaction only against a change it cannot see that another transaction committed (a row updated after the
 * snapshot, or, for SSI, a conflict partner that committed first): each failed attempt of a session is caused by
 * another session's commit after that attempt's snapshot, and the next attempt's snapshot sees that commit, so it
 * is never the cause again. A session therefore fails at most n - 1 times, and one that gave up after r retries
 * (r + 1 failures) saw r + 1 others commit. So: with retries >= n - 1 every transfer commits, however slow the
 * machine (n=8 with 4 retries did run out on a busy one: 4 is not enough for 8); with fewer, at least r + 1
 * commit and the others may end in 40001 (without retries, at least the first commits).
 */
export const endings = (v: Variant): Who => {
  const least = Math.min(v.n, Number(v.params.retries) + 1)
  return least >= v.n ? { committed: v.n } : { committed: [least, v.n], '40001': [0, v.n - least] }
}

export default defineScenario({
  id: 'serializable-retry',
  title: 'N concurrent transfers at SERIALIZABLE with the retry loop: money conserved, retries counted',
  source: { article: 'isolation-levels', section: 'SSI: retrying serialization failures' },
  story: [
    `--accounts accounts hold ${INITIAL} each; session i transfers ${AMOUNT} from account i to account i+1 (mod the number of accounts).`,
    "The article's transfer_funds: lock the rows (here both, in id order, so transfers cannot deadlock), check funds, debit, credit.",
    'At SERIALIZABLE (and REPEATABLE READ) a transfer whose rows another committed transfer changed fails with 40001;',
    'the retry loop runs the whole transaction again after an exponential backoff with jitter, 40001 only, at most --retries times.',
    "Each 40001 is caused by another transfer committing after that attempt's snapshot, a different one each time: with --retries n-1 or more",
    'every transfer commits however slow the machine; with fewer, a session may run out of retries (at least retries+1 others committed first).',
    'At READ COMMITTED the same transfers wait for the row locks instead. The invariant: no money created or lost, and every',
    'account equals its initial balance plus what the committed transfers (one ledger row each) moved in and out.',
  ],
  params: {
    ...isolationParam('serializable'),
    accounts: { flag: '--accounts <k>', description: 'number of accounts the transfers go between', kind: 'whole', default: 3, min: 2, max: 200 },
    retries: { flag: '--retries <k>', description: 'retry a transaction that failed with 40001 up to k times', kind: 'whole', default: 4, min: 0 },
  },
  sessionCount: { default: 4, min: 2, max: 200 },
  isolation: levelParam,
  setup: [
    `create table accounts (id int primary key, balance int not null check (balance >= 0))`,
    `insert into accounts select g, ${INITIAL} from generate_series(1, 200) g`,
    `create table transfers (session text primary key, from_id int not null, to_id int not null, amount int not null)`,
  ],
  binds: {
    from: { describe: 'account (session index mod --accounts) + 1', value: (ctx) => (ctx.index % Number(ctx.params.accounts)) + 1 },
    to: { describe: 'the next account after :from', value: (ctx) => ((ctx.index + 1) % Number(ctx.params.accounts)) + 1 },
  },
  sessions: ({ params, n }) =>
    replicate(n, {
      steps: {
        begin: begin(params),
        lock: 'select id, balance, id = :from as is_from from accounts where id in (:from, :to) order by id for update',
        debit: step(`update accounts set balance = balance - ${AMOUNT} where id = :from`, {
          rejectIf: ({ rows }) => rows.lock.find((r) => r.is_from)!.balance < 10 && 'insufficient funds',
        }),
        credit: `with u as (update accounts set balance = balance + ${AMOUNT} where id = :to returning id)
insert into transfers select :session, :from::int, u.id, ${AMOUNT} from u returning to_id`,
        commit: 'commit',
      },
      retry: { max: Number(params.retries), on: ['40001'], backoff: true },
    }),
  invariant: {
    description: (p) => `money conserved over ${p.accounts} accounts and every committed transfer applied exactly once`,
    sql: `with k as (select generate_series(1, :accounts::int) as id),
     want as (select k.id, ${INITIAL}
                - coalesce((select sum(amount) from transfers t where t.from_id = k.id), 0)
                + coalesce((select sum(amount) from transfers t where t.to_id = k.id), 0) as balance from k)
select total = expected_total and mismatched = 0 as held, total, expected_total, mismatched, applied
  from (select (select sum(balance)::int from accounts a join k using (id)) as total,
               ${INITIAL} * :accounts::int as expected_total,
               (select count(*)::int from want join accounts a using (id) where a.balance <> want.balance) as mismatched,
               (select count(*)::int from transfers) as applied) x`,
    observed: (r) => `total ${r.total} of ${r.expected_total}, ${r.applied} transfers applied, ${r.mismatched} accounts off`,
  },
  documented: {
    postgres: {
      lockstep: (v) =>
        v.params.isolation === 'read committed'
          ? serialized('the transfers wait for each other\'s row locks (13.2.1)', { committed: v.n })
          : prevented('a transfer that waited for rows another one changed fails with 40001 (13.2.2, 13.2.3)', endings(v)),
      serial: (v) => clean('one transfer after another', { committed: v.n }),
      barrier: (v) =>
        v.params.isolation === 'read committed'
          ? [serialized('they waited for the row locks', { committed: v.n }), clean('they did not overlap', { committed: v.n })]
          : [prevented('losers got 40001', endings(v)), serialized('they waited but nothing failed', { committed: v.n }), clean('they did not overlap', { committed: v.n })],
    },
  },
  checks: [
    { label: 'read committed', params: { isolation: 'read committed' } },
    { label: 'repeatable read', params: { isolation: 'repeatable read' } },
    // n - 1 retries: every transfer commits whatever the timing (see endings).
    { label: 'n=8', n: 8, params: { retries: 7 } },
  ],
  unavailable: { mysql: "SSI's retry loop is PostgreSQL's story: these transfers lock their rows in id order, so InnoDB's SERIALIZABLE (two-phase locking) would only make them wait" },
})
