// predicate-read (isolation-levels article, phantom read x write skew): each transaction sums an account's
// ledger (a predicate read), finds 100, and inserts a withdrawal that matches the other's predicate. READ
// COMMITTED and REPEATABLE READ: the account ends at -50 (violated): RR's snapshot stops phantoms in reads,
// not this. SERIALIZABLE: SSI's predicate lock catches the insert; t2 fails with 40001 (held, prevented).
import { anomaly, clean, defineScenario, levelParam, prevented, step } from '../src/scenario.js'
import { SER_SSI, begin, isolationParam, otherLevels } from './_shared/isolation.js'
import { DEADLOCK, M, myBegin } from './_shared/innodb.js'

const BOTH = { t1: 'committed', t2: 'committed' }

export default defineScenario({
  id: 'predicate-read',
  title: 'predicate read racing with an insert that matches it (no overdraft on a ledger)',
  source: { article: 'isolation-levels', section: 'Anomalies: write skew' },
  story: [
    'A ledger: account 1 has one entry of +100; the rule is that its sum never goes below 0.',
    'T1 sums the entries (100) and inserts -80; T2 summed 100 too and inserts -70: the sum is -50.',
    'There is no row to lock: the conflict is between a predicate (account = 1) and new rows that match it.',
    'READ COMMITTED and REPEATABLE READ: violated. SERIALIZABLE: the predicate lock sees it, 40001 for T2.',
  ],
  params: isolationParam(),
  sessionCount: { default: 2, min: 2, max: 2 },
  isolation: levelParam,
  setup: ({ engine }) => [
    engine === 'mysql'
      ? `create table entries (id int auto_increment primary key, account int not null, amount int not null)`
      : `create table entries (id serial primary key, account int not null, amount int not null)`,
    `insert into entries (account, amount) values (1, 100)`,
  ],
  sessions: ({ params, engine }) => {
    const withdraw = (amount: number) => ({
      steps: {
        begin: engine === 'mysql' ? myBegin(String(params.isolation)) : begin(params),
        sum: engine === 'mysql' ? 'select coalesce(sum(amount), 0) as balance from entries where account = 1' : 'select coalesce(sum(amount), 0)::int as balance from entries where account = 1',
        withdraw: step(`insert into entries (account, amount) values (1, -${amount})`, {
          rejectIf: ({ prior }) => prior.sum.balance < amount && 'insufficient funds',
        }),
        commit: 'commit',
      },
    })
    return { t1: withdraw(80), t2: withdraw(70) }
  },
  permutation: 't1.begin t1.sum t2.begin t2.sum t1.withdraw t1.commit t2.withdraw t2.commit',
  defaultSchedule: 'lockstep',
  invariant: {
    description: 'the ledger of account 1 never sums below 0',
    sql: ({ engine }) =>
      engine === 'mysql'
        ? `select coalesce(sum(amount), 0) >= 0 as held, coalesce(sum(amount), 0) as balance, count(*) as entries from entries where account = 1`
        : `select coalesce(sum(amount), 0) >= 0 as held, coalesce(sum(amount), 0)::int as balance, count(*)::int as entries from entries where account = 1`,
    observed: (r) => `sum ${r.balance} over ${r.entries} entries`,
  },
  documented: {
    postgres: {
      levels: {
        'read committed': anomaly('serialization anomaly possible', BOTH),
        'repeatable read': anomaly('serialization anomaly possible (13.2.2)', BOTH),
        serializable: prevented(SER_SSI, { t1: 'committed', t2: '40001' }),
      },
      serial: clean('t2 sums 20 and is refused', { t1: 'committed', t2: 'rejected: insufficient funds' }),
    },
    mysql: {
      levels: {
        'read uncommitted': anomaly(M.RU, BOTH),
        'read committed': anomaly(M.RC, BOTH),
        'repeatable read': anomaly(`${M.RR}: the sums read the snapshot and take no locks, so neither INSERT waits`, BOTH),
        // Both sums take shared next-key locks on the ledger; each INSERT waits for the other's: a deadlock.
        serializable: [prevented(`${M.SER}; ${M.DEADLOCK}`, { t1: 'committed', t2: DEADLOCK }), prevented(M.DEADLOCK, { t1: DEADLOCK, t2: 'committed' })],
      },
      serial: clean('t2 sums 20 and is refused', { t1: 'committed', t2: 'rejected: insufficient funds' }),
    },
  },
  checks: otherLevels(),
})
