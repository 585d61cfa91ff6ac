// race explore --jobs on real servers: two jobs (each its own schema, control connection and sessions) give the same
// result as one, field for field bar the clock and the jobs (the groups, their counts and lines, every interleaving,
// the shortest violation), for an exhaustive search, a seeded sample that shrinks, and a search with waits and a
// deadlock; the reduced search too, on two jobs (runs made ahead of the one-job search, taken in its order: the
// same groups and shortest, its runs, and the runs made ahead it did not need said). Bad --jobs values exit 2 with one line; Ctrl-C while two jobs
// run (one waiting on a lock the test holds, the other waiting for a branch) leaves no schema and no backend. The
// --shard i/n parts of an exhaustive search, merged, are the whole search.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import postgres, { type Sql } from 'postgres'
import { exploreJson, type Explored } from '../support/explore.js'
import { backendsOf, oneCleanLine } from '../support/faults.js'
import { spawnRace, until } from '../support/procs.js'
import { race, ROOT, schemasOf, serverUrls, useServer, type TestServer } from '../support/server.js'
import { victimFreeKey } from '../../speed/explore.js'

let server: TestServer
let servers: [string, string][] = []
const admins = new Map<string, Sql>()
before(async () => {
  server = await useServer()
  servers = await serverUrls(server)
  if (servers.length < 2) console.log('# PostgreSQL 15 does not answer at 127.0.0.1:5432: --jobs is checked on the test server alone')
  for (const [, url] of servers) admins.set(url, postgres(url, { max: 1, onnotice: () => {} }))
})
after(async () => {
  for (const sql of admins.values()) await sql.end({ timeout: 1 })
  await server.stop()
})

const ex = (f: string) => path.join(ROOT, 'examples', f)

/** The result without what depends on the clock or the jobs. */
type Doc = Explored & { ms?: number; jobs?: number; jobsNote?: string; ahead?: { made: number; wasted: number } }
function comparable(j: Doc): unknown {
  const { ms: _ms, perSecond: _ps, jobs: _jobs, jobsNote: _note, ahead: _ahead, groups, every, ...rest } = j as Doc & { every?: Every[] }
  // Which session a deadlock cancels is the server's timing (victimFree, below), not the search's: in the groups and
  // in each interleaving's own record.
  return { ...rest, groups: victimFree(groups as Parameters<typeof victimFree>[0]), every: every?.map(victimFreeRun) }
}

type Every = { line: string; outcomes: Record<string, string>; waited?: unknown; raised?: unknown } & Record<string, unknown>

/**
 * One interleaving's record; where it ended in a deadlock, without which session was cancelled, who waited, or the
 * balances the other one's move left (whether the invariant held is kept).
 */
function victimFreeRun(e: Every): unknown {
  if (!Object.values(e.outcomes).includes('40P01')) return e
  const { outcomes, waited: _w, raised: _r, observed: _o, ...rest } = e
  return { ...rest, endings: Object.values(outcomes).sort() }
}

// `shared`: its steps take advisory locks, which the whole database shares: the search runs on one job (issue 38).
const RACES: { name: string; args: string[]; search: string; shared?: boolean }[] = [
  { name: 'the check-then-insert spec, every order', args: [ex('explore-orders.spec'), '--exhaustive'], search: 'exhaustive' },
  { name: 'its advisory-lock fix, every order (on one job: advisory keys are the database\'s)', args: [ex('explore-orders-fixed.spec'), '--exhaustive'], search: 'exhaustive', shared: true },
  { name: 'lost update fixed with FOR UPDATE, every order (steps that wait on row locks)', args: ['lost-update-for-update', '--exhaustive'], search: 'exhaustive' },
  { name: 'deadlock on advisory keys, every order (on one job)', args: ['deadlock', '--exhaustive'], search: 'exhaustive', shared: true },
  { name: 'three sessions, a seeded PCT sample, shrunk', args: [ex('orders.spec'), '--n', '3', '--sample', '12', '--seed', '4'], search: 'sample' },
  { name: 'write skew at SERIALIZABLE, every order', args: ['write-skew', '--exhaustive', '--isolation', 'serializable'], search: 'exhaustive' },
  { name: 'lost update, the reduced search', args: ['lost-update'], search: 'reduced' },
  { name: 'three sessions of check-then-insert, the reduced search', args: [ex('explore-orders-3.spec')], search: 'reduced' },
]

/**
 * The one-job searches, by server and arguments: the shard test below merges its parts into what one of these found,
 * so the same search is not run twice (run by itself, that test searches again).
 */
const wholes = new Map<string, Explored>()
const wholeKey = (url: string, args: string[]) => `${url} ${args.join(' ')}`

for (const race_ of RACES) {
  test(`--jobs 2 gives what --jobs 1 gives: ${race_.name}`, async () => {
    for (const [where, url] of servers) {
      const admin = admins.get(url)!
      const one = await exploreJson(url, admin, [...race_.args, '--jobs', '1'])
      wholes.set(wholeKey(url, race_.args), one.j)
      const two = await exploreJson(url, admin, [...race_.args, '--jobs', '2'])
      const a = one.j as Doc
      const b = two.j as Doc
      assert.equal(a.search, race_.search, where)
      assert.equal(one.code, two.code, where)
      assert.equal(a.jobs, 1, where)
      if (race_.search === 'reduced') {
        assert.equal(b.jobs, 2, `${where}: the reduced search runs on two jobs`)
        assert.equal(b.jobsNote, undefined)
        // The one-job search's runs, and the runs made ahead that it did not need, said: made = runs + wasted.
        assert.ok(b.ahead, `${where}: the runs made on two jobs are said`)
        assert.equal(b.ahead.made, b.runs + b.ahead.wasted, where)
        assert.equal(a.ahead, undefined, where)
      } else if (race_.shared) {
        assert.equal(b.jobs, 1, `${where}: advisory keys are the whole database's`)
        assert.match(b.jobsNote ?? '', /whole database shares/)
      } else assert.equal(b.jobs, 2, where)
      assert.deepEqual(comparable(b), comparable(a), where)
    }
  })
}

test('bad --jobs values exit 2 with one line naming --jobs; explore() names jobs', async () => {
  const url = servers[0][1]
  for (const [value, re] of [
    ['0', /--jobs must be at least 1/],
    ['-2', /--jobs must be a whole number/],
    ['many', /--jobs must be a whole number/],
    ['1.5', /--jobs must be a whole number/],
    ['65', /--jobs must be at most 64/],
  ] as const) {
    const r = await race(['explore', 'lost-update', '--jobs', value], { url })
    assert.equal(r.code, 2, r.stderr)
    assert.equal(r.stdout, '')
    oneCleanLine(r.stderr, re)
  }
  const { explore } = await import('../../src/index.js')
  for (const jobs of [0, 2.5, -1, null as unknown as number]) {
    await assert.rejects(explore('lost-update', { databaseUrl: url, jobs }), (e: Error) => e.name === 'RaceError' && /^jobs /.test(e.message), String(jobs))
  }
})

test('--shard 1/3, 2/3, 3/3 of an exhaustive search, merged, are the whole search (groups, counts, shortest)', async () => {
  const { mergeShards } = await import('../../src/explore/merge.js')
  type Result = Parameters<typeof mergeShards>[0][number]
  for (const [where, url] of servers) {
    const admin = admins.get(url)!
    for (const args of [[ex('explore-orders.spec'), '--exhaustive'], ['deadlock', '--exhaustive']]) {
      const whole = wholes.get(wholeKey(url, args)) ?? (await exploreJson(url, admin, [...args, '--jobs', '1'])).j
      const parts: Result[] = []
      for (const i of [1, 2, 3]) parts.push((await exploreJson(url, admin, [...args, '--shard', `${i}/3`])).j as unknown as Result)
      assert.equal(
        parts.reduce((a, x) => a + x.runs, 0),
        whole.runs,
        `${where} ${args[0]}: each interleaving is reported by one shard`,
      )
      const merged = mergeShards(parts)
      assert.deepEqual(victimFree(merged.groups), victimFree(whole.groups), where)
      assert.deepEqual(merged.shortest, whole.shortest, where)
      assert.deepEqual([merged.runs, merged.interleavings, merged.violating, merged.exitCode], [whole.runs, whole.interleavings, whole.violating, whole.exitCode], where)
      assert.throws(() => mergeShards(parts.slice(0, 2)), /shards 1, 2 given; a search in 3 needs each of 1, 2, 3 once/)
    }
  }
})

/**
 * Groups as [key, count, lines], where an ending in a deadlock (40P01) is keyed without which session it ended: the
 * server cancels the session whose deadlock_timeout fires first, which is the first to wait unless the machine is too
 * busy to run its timer in time (seen in npm test, two files at a time beside other jobs: one line of the deadlock
 * race ended s1 40P01 in one shard and s2 40P01 in the whole search). Which one is the server's timing, not the
 * search's; every other group, each count and each line are compared as they are.
 */
function victimFree(groups: readonly { key: string; count: number; lines: readonly string[] }[]): [string, number, string[]][] {
  const out = new Map<string, [string, number, string[]]>()
  for (const g of groups) {
    const k = victimFreeKey(g.key)
    const e = out.get(k) ?? [k, 0, []]
    e[1] += g.count
    e[2].push(...g.lines)
    out.set(k, e)
  }
  return [...out.values()].map(([k, n, lines]) => [k, n, [...lines].sort()] as [string, number, string[]]).sort((a, b) => a[0].localeCompare(b[0]))
}

// Each session's step runs until race cancels it (a long pg_sleep, seen in pg_stat_activity as wait event PgSleep):
// nothing the whole database shares (an advisory lock would put the search on one job).
const HELD = `setup { create table t (x int) }
invariant "nothing to break" { select count(*) = 0 from t }
expect held
session s1
step w1 { select pg_sleep(110) }
session s2
step w2 { select pg_sleep(110) }
`

for (const [how, extra] of [
  ['an exhaustive search (the second job waits for a branch)', ['--exhaustive']],
  ['a sample (both jobs wait on the lock)', ['--sample', '4', '--seed', '1']],
] as const) {
  test(`Ctrl-C during --jobs 2, ${how}: exit 130, one line, no schema and no backend left`, async () => {
    const url = servers[0][1]
    const admin = admins.get(url)!
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-jobs-'))
    const spec = path.join(dir, 'held.spec')
    fs.writeFileSync(spec, HELD)
    try {
      const child = spawnRace(['explore', spec, ...extra, '--jobs', '2', '--step-timeout', '60s'], url, 120_000)
      const pid = child.child.pid!
      // Both jobs have made their schema, and a session is in its step (both, for the sample).
      const waiting = extra[0] === '--sample' ? 2 : 1
      await until('two run schemas and a session in its long step', async () => {
        if ((await schemasOf(admin, pid)).length !== 2) return false
        const rows = await admin`select count(*)::int as n from pg_stat_activity where application_name like 'race held %' and wait_event = 'PgSleep'`
        return rows[0].n >= waiting
      })
      // Its backends: by its TCP ports, or (over a Unix socket, the test's own embedded server) by their names.
      let backends = (await backendsOf(admin, child)).map((b) => b.pid)
      if (!backends.length) backends = (await admin`select pid from pg_stat_activity where application_name in ('race control', 'race held s1', 'race held s2')`).map((x) => Number(x.pid))
      assert.ok(backends.length >= 4, `two controls and the sessions: ${backends.join(', ')}`)
      child.child.kill('SIGINT')
      const r = await child.done
      assert.equal(r.code, 130, r.stdout + r.stderr)
      oneCleanLine(r.stderr, /interrupted by SIGINT/)
      assert.deepEqual(await schemasOf(admin, pid), [], "every job's schema is dropped")
      const left = await admin`select pid from pg_stat_activity where pid = any(${backends}::int[])`
      assert.deepEqual(left.map((x) => x.pid), [], 'no backend left')
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
}
