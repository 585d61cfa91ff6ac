// Issue 41: a spec's plain setup (specfile/plain.ts) runs guarded in a run's first trial and as written in the
// trials after it; every trial still starts from a schema made again and sessions reset. Whatever a trial's
// sessions leave behind (a sequence advanced, a session GUC, a temporary table, a session-level advisory lock)
// must not reach the next trial: each session's first step writes down what it finds, and the invariant says
// whether it found nothing. Against a real server (DATABASE_URL, else embedded PostgreSQL).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseSpec } from '../../src/specfile/parse.js'
import { specToScenario } from '../../src/specfile/scenario.js'
import { BLOCK_BEGINS } from '../../src/specfile/guard.js'
import { runScenario, useLab } from '../support/server.js'

const ctx = useLab()

const session = (name: string, key: number) => `session ${name}
step ${name}look { insert into seen (who, guc, temps, locks) select '${name}', current_setting('race.left', true), (select count(*) from pg_catalog.pg_class where relnamespace = pg_catalog.pg_my_temp_schema()), (select count(*) from pg_catalog.pg_locks where locktype = 'advisory' and pid = pg_catalog.pg_backend_pid()) }
step ${name}ins { insert into orders (status) values ('${name}') }
step ${name}leave { select pg_catalog.set_config('race.left', 'yes', false), pg_catalog.pg_advisory_lock(${key}) }
step ${name}temp { create temp table if not exists scratch (x int) }
`

const SPEC = `setup { create table orders (id serial primary key, status text not null);
  create table seen (who text not null, guc text, temps int not null, locks int not null) }
invariant "nothing left by an earlier trial" { select (select coalesce(bool_and(coalesce(guc, '') <> 'yes' and temps = 0 and locks = 0), true) from seen) and (select coalesce(max(id), 0) <= 2 from orders) }
expect held
${session('s1', 4101)}
${session('s2', 4102)}`

/** Runs `spec` for `trials` trials, and the setup texts sent to the run's SQL connection, trial by trial. */
async function runRecorded(spec: string, trials: number): Promise<{ held: (boolean | null | undefined)[]; guarded: boolean[] }> {
  const lab = ctx.lab
  const sent: string[] = []
  const own = lab.runQuery.bind(lab)
  lab.runQuery = (space, text, args) => (sent.push(text), own(space, text, args))
  try {
    const out = await runScenario(lab, specToScenario(parseSpec(spec, 'leftovers.spec')), { trials })
    for (const t of out.trials) for (const x of t.sessions) assert.equal(x.outcome, 'committed', `${x.name}: ${x.outcome} ${x.errors}`)
    // The setup texts: those not the invariant's (it starts with select).
    const setups = sent.filter((x) => !/^select /.test(x))
    return { held: out.trials.map((t) => t.invariant.held), guarded: setups.map((x) => x.includes(BLOCK_BEGINS)) }
  } finally {
    lab.runQuery = own
  }
}

test('a plain setup runs guarded in the first trial, as written after it; a sequence, a GUC, a temp table and an advisory lock left by a trial never reach the next', async () => {
  const r = await runRecorded(SPEC, 4)
  assert.deepEqual(r.held, [true, true, true, true], 'every trial starts as the first did')
  assert.deepEqual(r.guarded, [true, false, false, false], 'the guard in the first trial only')
})

test('a setup that is not plain runs guarded in every trial', async () => {
  const r = await runRecorded(SPEC.replace('status text not null)', "status text not null default pg_catalog.format('%s', 'x'))"), 3)
  assert.deepEqual(r.held, [true, true, true])
  assert.deepEqual(r.guarded, [true, true, true])
})
