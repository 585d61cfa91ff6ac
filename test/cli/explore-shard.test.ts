// race explore --shard i/n of the reduced search (src/explore/reduce-shard.ts) on real servers, the test server and
// PostgreSQL 15 when it answers: the three-session check-then-insert spec run as 1/2 and 2/2, and as 1/3 .. 3/3, each
// part alone, joined by npm run explore:merge, gives the one-part search's groups, verdict and shortest violation, and
// every interleaving it ran; each part says what it ran, in --json and in its report's last line (shared with the
// others before the split, its own, found above the split), and the merge how many interleavings more than one part
// ran. explore:merge refuses, in one line with exit 2, a part of another mode (reduced with exhaustive) and parts
// that split the search at other branches.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import postgres, { type Sql } from 'postgres'
import { exploreJson, type Explored } from '../support/explore.js'
import { race, ROOT, serverUrls, useServer, type TestServer } from '../support/server.js'

let server: TestServer
let servers: [string, string][] = []
const admins = new Map<string, Sql>()
let dir = ''
before(async () => {
  server = await useServer()
  servers = await serverUrls(server)
  for (const [, url] of servers) admins.set(url, postgres(url, { max: 1, onnotice: () => {} }))
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-shard-'))
})
after(async () => {
  for (const sql of admins.values()) await sql.end({ timeout: 1 })
  await server.stop()
  fs.rmSync(dir, { recursive: true, force: true })
})

const SPEC = path.join(ROOT, 'examples', 'explore-orders-3.spec')

interface Work {
  before: number
  owned: number
  found: number
  branches: number
  split: string
}
type Part = Explored & { shard?: { index: number; count: number; reduced?: Work }; merged?: { parts: number; repeated: number }; jobs?: number; jobsNote?: string }

function merge(files: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [path.join(ROOT, 'dist', 'scripts', 'explore-merge.js'), ...files], (e, stdout, stderr) => resolve({ code: e ? ((e as { code?: number }).code ?? null) : 0, stdout, stderr }))
  })
}

async function refused(files: string[], re: RegExp): Promise<void> {
  const r = await merge(files)
  assert.equal(r.code, 2, r.stdout + r.stderr)
  assert.equal(r.stdout, '')
  assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr)
  assert.match(r.stderr, re)
}

const keys = (j: Explored) => j.groups.map((g) => [g.key, g.held]).sort()
const lines = (j: Explored) => new Set(j.every.map((x) => x.line))
const stepsOf = (line: string) => line.split(' ').length

test('--shard 1/2 and 2/2, 1/3 .. 3/3 of the reduced search, merged, give the one-part search (groups, verdict, shortest)', async () => {
  for (const [where, url] of servers) {
    const admin = admins.get(url)!
    const whole = (await exploreJson(url, admin, [SPEC])).j as Part
    assert.equal(whole.search, 'reduced', where)
    assert.ok(whole.complete && whole.shortest, where)
    for (const n of [2, 3]) {
      const files: string[] = []
      const parts: Part[] = []
      for (let i = 1; i <= n; i++) {
        const { j, code } = await exploreJson(url, admin, [SPEC, '--shard', `${i}/${n}`, '--jobs', '2'])
        const p = j as Part
        assert.equal(p.search, 'reduced', where)
        assert.ok(code === 0 || code === 1, `${where} part ${i}/${n}: exit ${code}`)
        // A part runs on one job, and says so.
        assert.equal(p.jobs, 1, where)
        assert.match(p.jobsNote ?? '', /split by --shard runs on one job/)
        const w = p.shard?.reduced
        assert.ok(w, `${where} part ${i}/${n} says what it ran`)
        assert.equal(w.before + w.owned + w.found, p.runs, `${where} part ${i}/${n}: every run is before the split, its own, or found`)
        assert.ok(w.branches >= 2, `${where}: the search was split`)
        assert.ok(p.runs < whole.runs + 5, `${where} part ${i}/${n}: ${p.runs} runs, the whole ${whole.runs}`)
        files.push(path.join(dir, `${where.replace(/\W/g, '')}-${i}of${n}.json`))
        fs.writeFileSync(files[i - 1], JSON.stringify(p))
        parts.push(p)
      }
      const r = await merge(files)
      assert.equal(r.code, whole.exitCode, r.stderr)
      const m = JSON.parse(r.stdout) as Part
      const what = `${where} in ${n}: parts ${parts.map((p) => `${p.runs} (${p.shard!.reduced!.before}+${p.shard!.reduced!.owned}+${p.shard!.reduced!.found})`).join(', ')}, whole ${whole.runs}`
      console.log(`# ${what}; merged ${m.interleavings} interleavings, ${m.merged?.repeated} run by more than one part`)
      assert.deepEqual(keys(m), keys(whole), what)
      assert.equal(m.complete, true, what)
      assert.equal(m.exitCode, whole.exitCode, what)
      // Every interleaving the one-part search ran, the parts ran (they explore as much or more, never less).
      for (const l of lines(whole)) assert.ok(lines(m).has(l), `${what}: ${l}`)
      assert.equal(m.merged?.repeated, parts.reduce((a, p) => a + p.interleavings, 0) - m.interleavings, what)
      assert.deepEqual([m.shortest?.switches, stepsOf(m.shortest!.line)], [whole.shortest!.switches, stepsOf(whole.shortest!.line)], what)
    }
  }
})

test("a part's report says in its last line what it ran: before the split, in its own branches, found above it", async () => {
  const [, url] = servers[0]
  const r = await race(['explore', SPEC, '--shard', '1/2'], { url, timeoutMs: 300_000 })
  assert.ok(r.code === 0 || r.code === 1, r.stderr)
  const out = r.stdout.trim().split('\n')
  assert.match(out[out.length - 1], /^\d+ runs in .* \(reduced search, on 1 job; part 1\/2: \d+ made by other parts too before the split, \d+ in its own branches, \d+ in branches found above the split \(another part may run them too\)\)$/)
  assert.match(r.stdout, /part 1 of 2 of a reduced search: \d+ runs \(npm run explore:merge joins/)
})

test('explore:merge refuses a reduced part with an exhaustive one, and parts that split at other branches, in one line, exit 2', async () => {
  const [where, url] = servers[0]
  const admin = admins.get(url)!
  const write = (name: string, j: unknown) => {
    const file = path.join(dir, `${name}.json`)
    fs.writeFileSync(file, JSON.stringify(j))
    return file
  }
  const r1 = (await exploreJson(url, admin, [SPEC, '--shard', '1/2'])).j as Part
  const r2 = (await exploreJson(url, admin, [SPEC, '--shard', '2/2'])).j as Part
  // A part of the exhaustive search of the same race (its 1,680 orders are not run again: only its mode differs).
  const e2 = { ...r2, search: 'exhaustive', mode: 'all', shard: { index: 2, count: 2, passed: 0 } }
  assert.equal(r2.search, 'reduced', where)
  const ok = await merge([write('r1', r1), write('r2', r2)])
  assert.ok(ok.code === 0 || ok.code === 1, ok.stderr)
  await refused([write('r1', r1), write('e2', e2)], /^explore-merge: merge: .* \(exhaustive, shard 2\/2\) is not a shard of the same search as .* \(shard 1\/2\)$/m)
  const other = { ...r2, shard: { ...r2.shard!, reduced: { ...r2.shard!.reduced!, split: '00000000' } } }
  await refused([write('r1', r1), write('r2-split', other)], /^explore-merge: merge: .* shard 2\/2 split the reduced search at other branches than shard 1\/2 .*: run every part again$/m)
})
