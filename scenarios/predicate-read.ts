// predicate-read (isolation article, ファントム x 書き込みスキュー): each transaction sums an account's ledger
// (a predicate read), finds 100, and inserts a withdrawal that matches the other's predicate. READ COMMITTED
// and REPEATABLE READ: the account ends at -50 (violated): RR's snapshot stops phantoms in reads, not this.
// SERIALIZABLE: SSI's predicate lock catches the insert; T2 fails with 40001 (held, prevented).
import { defineScenario } from '../src/scenario.js'
import { begin, expectDocumented, isolationParam, level, otherLevels } from './_fixtures/isolation.js'

const AMOUNT: Record<string, number> = { t1: 80, t2: 70 }

export default defineScenario({
  id: 'predicate-read',
  title: 'predicate read racing with an insert that matches it (no overdraft on a ledger)',
  source: 'isolation-levels article, ファントムリード / 書き込みスキュー',
  story: [
    'A ledger: account 1 has one entry of +100; the rule is that its sum never goes below 0.',
    'T1 sums the entries (100) and inserts -80; T2 summed 100 too and inserts -70: the sum is -50.',
    'There is no row to lock: the conflict is between a predicate (account = 1) and new rows that match it.',
    'READ COMMITTED and REPEATABLE READ: violated. SERIALIZABLE: the predicate lock sees it, 40001 for T2.',
  ],
  params: isolationParam(),
  defaultN: 2,
  nRange: [2, 2],
  isolation: level,
  setup: [`create table entries (id serial primary key, account int not null, amount int not null)`, `insert into entries (account, amount) values (1, 100)`],
  sessions: (p) => {
    const withdraw = (session: string) => ({
      steps: {
        begin: begin(p),
        sum: 'select coalesce(sum(amount), 0)::int as balance from entries where account = 1',
        withdraw: {
          sql: `-- if balance < ${AMOUNT[session]}: insufficient funds (409)\ninsert into entries (account, amount) values (1, -${AMOUNT[session]})`,
          run: (sql: import('postgres').Sql, ctx: import('../src/scenario.js').StepCtx) =>
            Number(ctx.prior.sum[0].balance) < AMOUNT[session]
              ? ctx.reject('insufficient funds')
              : sql.unsafe(`insert into entries (account, amount) values (1, -${AMOUNT[session]})`),
        },
        commit: 'commit',
      },
    })
    return { t1: withdraw('t1'), t2: withdraw('t2') }
  },
  defaultSchedule: 'lockstep',
  lockstep: () => 't1.begin t1.sum t2.begin t2.sum t1.withdraw t1.commit t2.withdraw t2.commit',
  invariant: {
    description: () => 'the ledger of account 1 never sums below 0',
    query: (sql) => sql`select coalesce(sum(amount), 0)::int as balance, count(*)::int as entries from entries where account = 1`,
    observed: ([r]) => `sum ${r.balance} over ${r.entries} entries`,
    holds: ([r]) => Number(r.balance) >= 0,
  },
  expect: expectDocumented('predicate-read'),
  checks: otherLevels(),
})
