// shared-lock (advisory-locks §3.3): readers take pg_advisory_xact_lock_shared and proceed together; a
// writer's pg_advisory_xact_lock waits for all of them; a reader that arrives after the writer queues behind it
// (PostgreSQL grants no lock that conflicts with one already awaited). Serialized: the writer was alone.
import { clean, defineScenario, keyBind, serialized, type SessionSpec } from '../src/scenario.js'
import { observations, observe } from './_shared/locks.js'

function side(fn: string): SessionSpec {
  return {
    steps: {
      begin: 'begin',
      lock: `select ${fn}(:key)`,
      enter: observe('enter', '1'),
      leave: observe('leave', '1'),
      commit: 'commit',
    },
  }
}

export default defineScenario({
  id: 'shared-lock',
  title: 'shared advisory locks: readers together, the writer alone, late readers behind the writer',
  source: { article: 'advisory-locks', section: '3.3' },
  story: [
    "Readers r1..rN take the settings key with pg_advisory_xact_lock_shared: they don't conflict, and all are inside at once.",
    'The writer w takes it with pg_advisory_xact_lock (exclusive): it waits until every reader has committed.',
    'A reader that arrives after the writer (late) is not let in beside the readers still inside: PostgreSQL queues it behind the waiting writer.',
    'Each session records when it enters and leaves (a sequence, so the order is real time); invariant: nobody was inside while the writer was.',
  ],
  params: {},
  sessionCount: { default: 2, min: 1, max: 20 },
  isolation: 'read committed',
  setup: [observations],
  binds: { key: keyBind('settings') },
  sessions: ({ n }) => {
    const out: Record<string, SessionSpec> = {}
    for (let i = 1; i <= n; i++) out[`r${i}`] = side('pg_advisory_xact_lock_shared')
    out.w = side('pg_advisory_xact_lock')
    out.late = side('pg_advisory_xact_lock_shared')
    return out
  },
  permutation: ({ n }) => {
    const r = Array.from({ length: n }, (_, i) => `r${i + 1}`)
    return [
      ...r.map((x) => `${x}.begin`),
      'w.begin late.begin',
      ...r.map((x) => `${x}.lock ${x}.enter`),
      'w.lock late.lock',
      ...r.map((x) => `${x}.leave ${x}.commit`),
      'w.enter w.leave w.commit late.enter late.leave late.commit',
    ].join(' ')
  },
  defaultSchedule: 'lockstep',
  invariant: {
    description: 'the writer was inside alone (no reader entered or left between its enter and leave)',
    sql: `with w as (select min(seq) filter (where what = 'enter') as i, max(seq) filter (where what = 'leave') as o from observations where session = 'w'),
     inside as (select max(c)::int as most from (select sum(case what when 'enter' then 1 else -1 end) over (order by seq) as c
                                                 from observations where session <> 'w') t)
select case when (select i from w) is null or (select o from w) is null then null else overlapping = 0 end as held, overlapping, readers_together, entered
  from (select (select count(*)::int from observations o, w where o.session <> 'w' and o.seq between w.i and w.o) as overlapping,
               (select most from inside) as readers_together,
               (select string_agg(session, ' ' order by seq) from observations where what = 'enter') as entered) x`,
    observed: (r) => `${r.overlapping} reader events inside the writer; up to ${r.readers_together} readers together; entered: ${r.entered}`,
  },
  documented: {
    postgres: {
      lockstep: ({ n }) => serialized('the writer waited for the readers, the late reader for the writer', { committed: n + 2 }),
      serial: ({ n }) => clean('one after another nobody waits', { committed: n + 2 }),
    },
  },
  // Transaction-level locks only: unchanged through a transaction pooler (advisory-locks §6).
  pooled: { modes: ['transaction', 'session'] },
  checks: [{ label: 'n=4 readers', n: 4 }],
  unavailable: { mysql: "MySQL has no shared user lock: GET_LOCK is exclusive only, so pg_advisory_lock_shared's readers-writer story has no counterpart" },
})
