// serializable-retry (isolation article, 直列化失敗のリトライパターン): N transfers between a few accounts at
// SERIALIZABLE, each wrapped in the article's retry loop (whole transaction, exponential backoff with jitter,
// 40001 only). Money is conserved, every transfer is applied once or reported, and the retries are counted.
// SERIALIZABLE and REPEATABLE READ: the losers get 40001 and their retry commits (held, prevented).
// READ COMMITTED: the losers wait for the row locks and never fail (held, serialized).
import { defineScenario, expectBy, replicate, type StepCtx } from '../src/scenario.js'
import { begin, isolationParam, level } from './_fixtures/isolation.js'

const AMOUNT = 10
const INITIAL = 100

/** Session i (0-based) moves money from account i mod k + 1 to the next one. */
const route = (ctx: Pick<StepCtx, 'index' | 'params'>) => {
  const k = Number(ctx.params.accounts)
  return { from: (ctx.index % k) + 1, to: ((ctx.index + 1) % k) + 1 }
}

export default defineScenario({
  id: 'serializable-retry',
  title: 'N concurrent transfers at SERIALIZABLE with the retry loop: money conserved, retries counted',
  source: 'isolation-levels article, 直列化失敗のリトライパターン',
  story: [
    `--accounts accounts hold ${INITIAL} each; session i transfers ${AMOUNT} from account i to account i+1 (mod the number of accounts).`,
    "The article's transfer_funds: lock the rows (here both, in id order, so transfers cannot deadlock), check funds, debit, credit.",
    'At SERIALIZABLE (and REPEATABLE READ) a transfer whose rows another committed transfer changed fails with 40001;',
    'the retry loop runs the whole transaction again after an exponential backoff with jitter, 40001 only, at most --retries times.',
    'At READ COMMITTED the same transfers wait for the row locks instead. The invariant: no money created or lost, and every',
    'account equals its initial balance plus what the committed transfers (one ledger row each) moved in and out.',
  ],
  params: {
    ...isolationParam('serializable'),
    accounts: { flag: '--accounts <k>', description: 'number of accounts the transfers go between', kind: 'whole', default: 3, min: 2 },
    retries: { flag: '--retries <k>', description: 'retry a transaction that failed with 40001 up to k times', kind: 'whole', default: 4, min: 0 },
  },
  defaultN: 4,
  nRange: [2, 200],
  isolation: level,
  setup: [
    `create table accounts (id int primary key, balance int not null check (balance >= 0))`,
    `insert into accounts select g, ${INITIAL} from generate_series(1, 200) g`,
    `create table transfers (session text primary key, from_id int not null, to_id int not null, amount int not null)`,
  ],
  sessions: (p, n) =>
    replicate(n, {
      steps: {
        begin: begin(p),
        lock: {
          sql: 'select id, balance from accounts where id in (:from, :to) order by id for update',
          run: (sql, ctx) => {
            const { from, to } = route(ctx)
            return sql`select id, balance from accounts where id in (${from}, ${to}) order by id for update`
          },
        },
        debit: {
          sql: `-- if balance(:from) < ${AMOUNT}: insufficient funds (rollback, reported)\nupdate accounts set balance = balance - ${AMOUNT} where id = :from`,
          run: (sql, ctx) => {
            const { from } = route(ctx)
            const row = ctx.prior.lock.find((r) => Number(r.id) === from)
            return Number(row?.balance) < AMOUNT
              ? ctx.reject('insufficient funds')
              : sql`update accounts set balance = balance - ${AMOUNT} where id = ${from}`
          },
        },
        credit: {
          sql: `update accounts set balance = balance + ${AMOUNT} where id = :to  -- and the ledger row in transfers`,
          run: (sql, ctx) => {
            const { from, to } = route(ctx)
            return sql`with u as (update accounts set balance = balance + ${AMOUNT} where id = ${to} returning id)
                       insert into transfers select ${ctx.session}, ${from}, u.id, ${AMOUNT} from u returning to_id`
          },
        },
        commit: 'commit',
      },
      retries: Number(p.retries),
    }),
  invariant: {
    description: (p) => `money conserved over ${p.accounts} accounts and every committed transfer applied exactly once`,
    query: (sql, { params }) => sql`
      with k as (select generate_series(1, ${Number(params.accounts)}) as id),
           want as (select k.id, ${INITIAL}
                      - coalesce((select sum(amount) from transfers t where t.from_id = k.id), 0)
                      + coalesce((select sum(amount) from transfers t where t.to_id = k.id), 0) as balance from k)
      select (select sum(balance)::int from accounts a join k using (id)) as total,
             ${INITIAL * Number(params.accounts)}::int as expected_total,
             (select count(*)::int from want join accounts a using (id) where a.balance <> want.balance) as mismatched,
             (select count(*)::int from transfers) as applied`,
    observed: ([r]) => `total ${r.total} of ${r.expected_total}, ${r.applied} transfers applied, ${r.mismatched} accounts off`,
    holds: ([r]) => Number(r.total) === Number(r.expected_total) && Number(r.mismatched) === 0,
  },
  expect: (ctx) => expectBy({ lockstep: [level(ctx.params) === 'read committed' ? 'serialized' : 'prevented'] })(ctx),
  checks: [
    { label: 'read committed', params: { isolation: 'read committed' } },
    { label: 'repeatable read', params: { isolation: 'repeatable read' } },
    { label: 'n=8', n: 8 },
  ],
})
