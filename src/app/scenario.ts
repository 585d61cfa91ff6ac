// An application race as a scenario: what the registry, race show, race run and the judge already know how to
// handle. Its sessions have no declared steps (their steps are the queries the function sends, labelled as they
// go: s1.q1, s1.q2, ..., and the points it marks); its documentation is the race's `expect` (held or violated),
// judged as a spec file's expect line is.
import path from 'node:path'
import { UsageError } from '../errors.js'
import type { TrialRunnerFactory } from '../engine/runner.js'
import { replicate, sessionLevelParam, type Scenario } from '../scenario.js'
import { appTrials } from './runner.js'
import { MAX_QUERIES } from './trial.js'
import type { AppDriver, AppRace } from './types.js'
import type { Fault } from './labels.js'

/** Marks what defineAppRace returns (a global symbol: the user's copy of the package and race's agree). */
export const APP_RACE = Symbol.for('racelab.appRace')

declare module '../scenario.js' {
  /** What an application race brings to the scenario contract: the runner of its trials, and its declaration. */
  interface ApplicationKind {
    /** Runs its trials (src/app/runner.ts). */
    runner: TrialRunnerFactory
    /** The race module's declaration (race show reads it). */
    race: AppRace
  }
}

/**
 * Identity with a mark, for type checking and for the loader: `export default defineAppRace({...})`. Typed by its
 * `driver`: with `driver: 'pg'`, `db` is a pg Client and ctx.pool a pg Pool. With `open`, `session` and `close` take
 * what open returns (where TypeScript infers it from open; else `any`, as they took before).
 */
export function defineAppRace<D extends AppDriver>(race: AppRace<D> & { open?: undefined }): AppRace<D>
export function defineAppRace<D extends AppDriver, O = any>(race: AppRace<D, O> & { open(...args: never[]): unknown }): AppRace<D, O> // eslint-disable-line @typescript-eslint/no-explicit-any
export function defineAppRace(race: AppRace): AppRace {
  Object.defineProperty(race, APP_RACE, { value: true, enumerable: false })
  return race
}

export function isAppRace(x: unknown): x is AppRace {
  if (!x || typeof x !== 'object') return false
  return (x as Record<symbol, unknown>)[APP_RACE] === true || (typeof (x as AppRace).session === 'function' && !('sessions' in x && typeof (x as { sessions: unknown }).sessions === 'function'))
}

/** The id of a race module: its own, else its file name without .race.mjs / .mjs, in kebab-case. */
function idOf(race: AppRace, file: string): string {
  if (race.id) return race.id
  const base = path.basename(file).replace(/\.(race\.)?(mjs|js|ts|mts)$/, '')
  return base.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '') || 'app-race'
}

/**
 * The invariant's SQL, as written: what decides is read from its result, never from its text (engine/run.ts
 * evaluate: exactly one row; its `held` column, else its one boolean column).
 */
export function invariantSqlOf(race: AppRace): string {
  return (typeof race.invariant === 'string' ? race.invariant : race.invariant?.sql ?? '').trim().replace(/;\s*$/, '')
}

/** The fields defineAppRace knows: any other is a typo or a field of another version, refused rather than ignored. */
const FIELDS = new Set(['id', 'title', 'story', 'driver', 'sessions', 'setup', 'session', 'rejects', 'prevention', 'invariant', 'expect', 'barrier', 'connection', 'open', 'close', 'maxQueries', 'mustComplete', 'sharedState'])

/** Problems with an application race's declaration: the first is the one line a user sees. */
export function appProblems(race: AppRace): string[] {
  const out: string[] = []
  const unknown = Object.keys(race).filter((k) => !FIELDS.has(k))
  if (unknown.length) out.push(`${unknown.map((k) => JSON.stringify(k)).join(', ')} ${unknown.length > 1 ? 'are not fields' : 'is not a field'} of defineAppRace (its fields: ${[...FIELDS].join(', ')})`)
  if (race.driver !== 'pg' && race.driver !== 'postgres' && race.driver !== 'mariadb' && race.driver !== 'mysql2') {
    out.push(`driver is ${JSON.stringify(race.driver)}: use 'pg' (node-postgres), 'postgres' (postgres.js), 'mariadb' (the mariadb connector) or 'mysql2' (the last two on MySQL/MariaDB)`)
  }
  if (typeof race.session !== 'function') out.push('session must be a function (db, ctx) => ... that calls your code')
  for (const k of ['open', 'close'] as const) if (race[k] !== undefined && typeof race[k] !== 'function') out.push(`${k} must be a function`)
  if (race.expect !== 'held' && race.expect !== 'violated') out.push(`expect is ${JSON.stringify(race.expect)}: say 'held' or 'violated' (what your documentation promises under this race)`)
  // No invariant at all: the race runs only under an oracle (--oracle serial), refused by the run otherwise.
  const inv = typeof race.invariant === 'string' ? race.invariant : race.invariant?.sql
  if (race.invariant !== undefined && (typeof inv !== 'string' || !inv.trim())) out.push("invariant must be SQL returning a boolean, e.g. 'select count(*) <= 1 from orders' (or leave it out and run with --oracle serial)")
  if (race.setup !== undefined && (!Array.isArray(race.setup) || race.setup.some((x) => typeof x !== 'string'))) out.push('setup must be a list of SQL strings')
  const b = race.barrier
  if (b !== undefined && !(typeof b === 'number' && Number.isInteger(b) && b >= 1) && !(typeof b === 'string' && /^[A-Za-z_]\w*$/.test(b))) {
    out.push(`barrier is ${JSON.stringify(b)}: give the query number k (the barrier stands before each session's k-th query) or a point's name`)
  }
  const r = race.rejects
  if (r !== undefined && typeof r !== 'function' && !(Array.isArray(r) && r.every((c) => typeof c === 'function'))) {
    out.push('rejects must be a list of the error classes your code throws on purpose (e.g. [Conflict]) or a predicate (err) => boolean')
  }
  const pv = race.prevention
  if (pv !== undefined && !(Array.isArray(pv) && pv.every((c) => typeof c === 'string' && /^[0-9A-Z]{5}(\/\d+)?$/.test(c)))) {
    out.push(`prevention is ${JSON.stringify(pv)}: give the SQLSTATEs that prevent the race, e.g. ['23505']`)
  }
  if (race.sharedState !== undefined && typeof race.sharedState !== 'boolean') out.push(`sharedState is ${JSON.stringify(race.sharedState)}: say true (the sessions share state in the process, an in-memory cache: race explore runs them in one process and every interleaving) or leave it out`)
  if (race.mustComplete !== undefined && typeof race.mustComplete !== 'boolean') out.push(`mustComplete is ${JSON.stringify(race.mustComplete)}: say true (every session must complete) or leave it out`)
  const mq = race.maxQueries
  if (mq !== undefined && !(typeof mq === 'number' && Number.isInteger(mq) && mq >= 1)) out.push(`maxQueries is ${JSON.stringify(mq)}: give a whole number of queries, at least 1`)
  const s = race.sessions
  if (s !== undefined && !(typeof s === 'number' && Number.isInteger(s) && s >= 1) && !(typeof s === 'object' && Number.isInteger(s.default) && s.default >= 1)) {
    out.push('sessions must be a whole number (the default --n) or { default, min, max }')
  }
  return out
}

/**
 * o.isolated: `file` is the race module this race was loaded from, which each session's worker may import again:
 * race explore then runs every session isolated (app/isolated.ts), unless the module says sharedState.
 */
export function appScenario(race: AppRace, file: string, o: { isolated?: boolean } = {}): Scenario {
  const problems = appProblems(race)
  if (problems.length) throw new UsageError(`${file}: ${problems[0]}${problems.length > 1 ? ` (and ${problems.length - 1} more)` : ''}`)
  const count = typeof race.sessions === 'object' ? race.sessions : { default: race.sessions ?? 2 }
  const description =
    race.invariant === undefined
      ? 'none declared (the race module has no invariant)'
      : typeof race.invariant === 'object' && race.invariant.description
        ? race.invariant.description
        : (typeof race.invariant === 'string' ? race.invariant : race.invariant.sql).trim()
  const resolved = path.resolve(file)
  const isolated = o.isolated === true && race.sharedState !== true
  return {
    id: idOf(race, file),
    title: race.title ?? `the application's own function, raced (${path.basename(file)})`,
    source: { article: 'file', section: file },
    story: race.story ?? [],
    // --isolation: the level race sets on each session's connection (the connection's own default when not given).
    params: sessionLevelParam(),
    sessionCount: { default: count.default, min: count.min ?? 1, max: count.max ?? 1000 },
    isolation: () => ({}),
    setup: race.setup ?? [],
    // No declared steps: a session's steps are the queries its function sends. One placeholder stands for them.
    sessions: (v) => replicate(v.n, { steps: { function: '' } }),
    defaultSchedule: 'barrier',
    invariant: { description, sql: invariantSqlOf(race) },
    ...(race.invariant === undefined ? { noInvariant: 'required' as const } : {}),
    ...(race.driver === 'mariadb' || race.driver === 'mysql2'
      ? { documented: { mysql: { lockstep: [], serial: [] } }, unavailable: { postgres: `its driver is ${race.driver === 'mysql2' ? 'mysql2' : 'the mariadb connector'}: give a mysql:// or mariadb:// --database-url` } }
      : { documented: { postgres: { lockstep: [], serial: [] } }, unavailable: { mysql: `its driver (${race.driver}) is a PostgreSQL driver` } }),
    expects: race.expect,
    ...(race.prevention?.length ? { prevention: [...race.prevention] } : {}),
    ...(race.mustComplete ? { mustComplete: true } : {}),
    // race explore runs each session in a worker of its own unless the module says its sessions share process state.
    kind: { type: 'application', race, file: resolved, runner: appTrials(race, resolved, { isolated: isolated }), isolated },
  }
}

/**
 * The same application race, its explorations offered these faults (--inject): at each moment a session's next
 * query is a fault's site, the explorer may run it as it is or make the server fail it (app/session.ts inject).
 */
export function withFaults(s: Scenario, faults: readonly Fault[], engine: 'postgres' | 'mysql', flag = '--inject'): Scenario {
  const kind = s.kind
  if (kind?.type !== 'application') throw new UsageError(`${flag} makes the server fail an application's query, to explore its retry and error paths: give an application race module (docs/app-races.md), not ${s.id}`)
  if (engine === 'mysql') throw new UsageError(`${flag} runs on PostgreSQL only for now (it raises the SQLSTATE in the session's transaction with a DO block): give a postgres:// --database-url`)
  // A query no call of the function may reach (past maxQueries race stops it) would be injected nowhere: refused here;
  // a site no session reaches in the runs is said after them (explore: notFired, the result unknown).
  const most = kind.race.maxQueries ?? MAX_QUERIES
  const beyond = faults.find((f) => f.site !== 'commit' && f.site > most)
  if (beyond) throw new UsageError(`${flag} ${beyond.text}: a session's function sends at most ${most} queries (its race module's maxQueries${kind.race.maxQueries === undefined ? ', by default' : ''}), so no session reaches query ${beyond.site}: nothing would be injected`)
  // Faults run where the sessions run: each in a worker of its own when the race is (app/isolated.ts, reduced by
  // default), else in one process (sharedState, a race object), every interleaving unless --reduce.
  return { ...s, kind: { ...kind, faults: faults.length, runner: appTrials(kind.race, kind.file, { inject: faults, isolated: kind.isolated === true }) } }
}
