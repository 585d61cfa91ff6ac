// lock-limit (advisory-locks §3.4): advisory locks live in the server's shared lock table, sized from
// max_locks_per_transaction × (max_connections + max_prepared_transactions). One transaction takes keys until
// pg_advisory_xact_lock fails with 53200 (out of shared memory); meanwhile another session cannot take even one
// key (pg_try_advisory_xact_lock fails with 53200 too, it does not answer false); after the filler rolls back,
// a key is granted again. It fills a resource the whole server shares, so it runs only on race's own embedded
// server, started with a small lock table so that it is quick.
import { advisoryKey, anomaly, defineScenario, step } from '../src/scenario.js'

const FULL = (code: unknown) => `the lock table is full (${code})`

/** Takes keys base, base+1, ... one per subtransaction, so the keys taken before the failure stay held. */
const takeUntilFull = `create function take_until_full(base bigint, most int) returns table (taken int, stopped_by text)
language plpgsql as $$
declare i int := 0;
begin
  while i < most loop
    begin
      perform pg_advisory_xact_lock(base + i);
    exception when sqlstate '53200' then  -- out of shared memory: the shared lock table is full
      taken := i; stopped_by := sqlstate; return next; return;
    end;
    i := i + 1;
  end loop;
  taken := i; stopped_by := null; return next;
end $$`

const outcome = (probe: string) => ({ filler: `rejected: ${FULL('53200')}`, probe, after: 'committed' })

export default defineScenario({
  id: 'lock-limit',
  title: 'the shared lock table is finite: one transaction fills it, then nobody gets a lock (53200)',
  source: { article: 'advisory-locks', section: '3.4' },
  story: [
    'Advisory locks are kept in the same shared lock table as every other lock; the manual sizes it as',
    'max_locks_per_transaction × (max_connections + max_prepared_transactions) (a floor: the server sizes it for all its processes, and the table can grow into spare shared memory).',
    "The filler takes one key after another in one transaction (keys :base, :base + 1, ...) until pg_advisory_xact_lock fails with 53200 (out of shared memory); each key in its own subtransaction, so what it took stays held.",
    'While it holds them, the probe asks for one unrelated key with pg_try_advisory_xact_lock: it fails with 53200 too (it does not answer false).',
    'The filler gives up and rolls back; the next request (after) gets a key at once.',
    "The capacity and the count come from the server (its settings, what take_until_full returned). It fills a resource the whole server shares, so it runs only on race's own embedded server.",
  ],
  params: {},
  sessionCount: { default: 3, min: 3, max: 3 },
  isolation: 'read committed',
  ownServer: {
    why: "fills the server's shared lock table, and every other session there gets 53200 meanwhile",
    settings: { max_locks_per_transaction: '10', max_connections: '20' },
  },
  setup: [takeUntilFull],
  binds: {
    base: { describe: "sha256('lock-limit:' || user), first 8 bytes, low 32 bits cleared (the trial's own key range)", value: (ctx) => (advisoryKey('lock-limit', ctx.user) >> 32n) << 32n },
    key: { describe: "sha256('lock-limit-probe:' || user), first 8 bytes: a key outside that range", value: (ctx) => advisoryKey('lock-limit-probe', ctx.user) },
  },
  sessions: () => ({
    filler: {
      steps: {
        begin: 'begin',
        fill: 'select taken, stopped_by from take_until_full(:base, 1000000)',
        rollback: step('rollback', { rejectIf: ({ prior }) => prior.fill?.stopped_by && FULL(prior.fill.stopped_by) }),
      },
    },
    probe: { steps: { begin: 'begin', try: 'select pg_try_advisory_xact_lock(:key) as got', commit: 'commit' } },
    after: { steps: { begin: 'begin', lock: 'select pg_try_advisory_xact_lock(:key) as got', commit: 'commit' } },
  }),
  permutation: 'filler.begin filler.fill probe.begin probe.try probe.commit filler.rollback after.begin after.lock after.commit',
  defaultSchedule: 'lockstep',
  invariant: {
    description: 'no lock request is refused for lack of shared memory',
    sql: `select case when taken is null then null else stopped_by is null end as held, taken, stopped_by, after_got,
       per_xact, conns, prepared, per_xact * (conns + prepared) as capacity
  from (select :filler.fill.taken::int as taken, :filler.fill.stopped_by::text as stopped_by, :after.lock.got::boolean as after_got,
               current_setting('max_locks_per_transaction')::int as per_xact, current_setting('max_connections')::int as conns,
               current_setting('max_prepared_transactions')::int as prepared) x`,
    observed: (r) =>
      `capacity ${r.capacity} by the manual (max_locks_per_transaction ${r.per_xact} × (max_connections ${r.conns} + max_prepared_transactions ${r.prepared})); ` +
      `the filler took ${r.taken ?? '?'} keys, then ${r.stopped_by ?? 'no error'}; after its rollback a key was ${r.after_got === true ? 'granted' : r.after_got === false ? 'busy' : 'not asked for'}`,
  },
  unavailable: { mysql: "it fills PostgreSQL's shared lock table (max_locks_per_transaction), which InnoDB does not have" },
  documented: {
    postgres: {
      lockstep: anomaly('the shared lock table is full: the manual says the server then grants no lock at all (53200)', outcome('53200')),
      // One after another the probe runs after the filler's rollback, when there is room again.
      serial: anomaly('the filler still fills the table (53200); alone, nobody else is refused', outcome('committed')),
      // Free-running, the probe and the next request each ask before, while or after the table is full.
      barrier: anomaly('each other request asked before, while or after the table was full', { filler: `rejected: ${FULL('53200')}`, committed: [0, 2], '53200': [0, 2] }),
    },
  },
})
