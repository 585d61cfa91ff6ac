// The embedded server's cached template cluster, through the real CLI on real servers: built once and copied
// by the next runs (shown by the cluster's system identifier: initdb makes a new one, a copy keeps the
// template's), a partial or damaged template rebuilt, concurrent first runs, race cache [clear], --no-cache,
// and a cache folder that is not the user's left alone. Every test uses a cache folder of its own
// (XDG_CACHE_HOME), never the user's, and checks only the run folders of the race processes it started.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, test } from 'node:test'
import postgres from 'postgres'
import { startEmbedded } from '../../src/servers/embedded.js'
import { mirrors } from '../../src/servers/versions.js'
import { race, type CliResult } from '../support/server.js'
import { runDirsOf, startRacing } from '../support/procs.js'

const made: string[] = []
after(() => {
  for (const d of made) fs.rmSync(d, { recursive: true, force: true })
})

/** A fresh XDG_CACHE_HOME: race's cache folder is <it>/race. */
function freshHome(): { env: NodeJS.ProcessEnv; cache: string } {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'race-cache-test-'))
  made.push(home)
  return { env: { XDG_CACHE_HOME: home }, cache: path.join(home, 'race') }
}

/** The template folders in a cache folder (build and trash folders start with a dot). */
function templates(cache: string): string[] {
  try {
    return fs.readdirSync(cache).filter((n) => !n.startsWith('.')).map((n) => path.join(cache, n))
  } catch {
    return []
  }
}

/** The cluster's system identifier: the first 8 bytes of global/pg_control. initdb draws a new one. */
function systemId(data: string): bigint {
  return fs.readFileSync(path.join(data, 'global', 'pg_control')).readBigUInt64LE(0)
}

/** A race run on the embedded default with this cache, checked: documented outcome, no run folder left. */
async function runOnce(env: NodeJS.ProcessEnv, extra: string[] = []): Promise<CliResult> {
  const r = await race(['run', 'advisory', '--n', '5', '--max-pending', '3', ...extra], { env })
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.match(r.stdout, /MATCH/)
  assert.deepEqual(runDirsOf(r.pid), [], 'the run folder is removed')
  return r
}

/** The system identifier of the cluster a running race started from (read from its run folder), then SIGINT. */
async function runningSystemId(env: NodeJS.ProcessEnv, extra: string[] = []): Promise<bigint> {
  const { child, dir, exited } = await startRacing(['run', 'broken', '--window', '20s', '--step-timeout', '30s', ...extra], 2, env)
  try {
    return systemId(path.join(dir, 'data'))
  } finally {
    child.kill('SIGINT')
    assert.equal(await exited, 130)
    assert.deepEqual(runDirsOf(child.pid!), [])
  }
}

async function cacheJson(env: NodeJS.ProcessEnv): Promise<{ dir: string; state: string; why?: string; templates: { key: string; state: string; bytes?: number }[]; building: string[] }> {
  const r = await race(['cache', '--json'], { env })
  assert.equal(r.code, 0, r.stderr)
  return JSON.parse(r.stdout)
}

test('the first run builds the template, later runs copy it (no initdb: the same system identifier), --no-cache does not', async () => {
  const { env, cache } = freshHome()
  assert.equal((await cacheJson(env)).state, 'absent')
  await runOnce(env)
  const [t] = templates(cache)
  assert.ok(t, 'a template after the first run')
  assert.equal(templates(cache).length, 1)
  assert.equal(fs.statSync(cache).mode & 0o777, 0o700, 'the cache folder is private')
  const marker = path.join(t, 'template.json')
  const before = { text: fs.readFileSync(marker, 'utf8'), mtime: fs.statSync(marker).mtimeMs, id: systemId(path.join(t, 'data')) }

  // A copy keeps the template's system identifier; initdb would have drawn a new one.
  assert.equal(await runningSystemId(env), before.id)
  await runOnce(env)
  assert.equal(fs.readFileSync(marker, 'utf8'), before.text, 'the template was not rebuilt')
  assert.equal(fs.statSync(marker).mtimeMs, before.mtime)

  // --no-cache: a fresh initdb (another identifier), and the template untouched.
  assert.notEqual(await runningSystemId(env, ['--no-cache']), before.id)
  assert.equal(fs.readFileSync(marker, 'utf8'), before.text)

  const doc = await cacheJson(env)
  assert.equal(doc.state, 'ok')
  assert.equal(doc.dir, cache)
  assert.deepEqual(doc.templates.map((x) => [x.key, x.state]), [[path.basename(t), 'ok']])
  assert.ok(doc.templates[0].bytes! > 1_000_000)
  const text = await race(['cache'], { env })
  assert.equal(text.code, 0)
  assert.ok(text.stdout.includes(cache) && text.stdout.includes(path.basename(t)), text.stdout)
})

test('--no-cache on an empty cache: the run works and leaves no template', async () => {
  const { env, cache } = freshHome()
  await runOnce(env, ['--no-cache'])
  assert.deepEqual(templates(cache), [])
})

for (const [what, damage] of [
  ['no marker (a partial template)', (t: string) => fs.rmSync(path.join(t, 'template.json'))],
  ['no global/pg_control', (t: string) => fs.rmSync(path.join(t, 'data', 'global', 'pg_control'))],
  ['a wrong PG_VERSION', (t: string) => fs.writeFileSync(path.join(t, 'data', 'PG_VERSION'), '9\n')],
  ['a catalog file missing', (t: string) => fs.rmSync(path.join(t, 'data', 'global', fs.readdirSync(path.join(t, 'data', 'global')).find((f) => /^\d+$/.test(f))!))],
  // Passes every check (its size is right) but the server refuses it: the run starts again from a new initdb.
  ['pg_control overwritten with zeros', (t: string) => fs.writeFileSync(path.join(t, 'data', 'global', 'pg_control'), Buffer.alloc(8192))],
  ['a catalog file cut short', (t: string) => {
    const dir = path.join(t, 'data', 'base', '1')
    const f = fs.readdirSync(dir).find((n) => /^\d+$/.test(n) && fs.statSync(path.join(dir, n)).size >= 16384)!
    fs.truncateSync(path.join(dir, f), 8192)
  }],
] as const) {
  test(`a damaged template is detected and rebuilt: ${what}`, async () => {
    const { env, cache } = freshHome()
    await runOnce(env)
    const [t] = templates(cache)
    const old = { id: systemId(path.join(t, 'data')), text: fs.readFileSync(path.join(t, 'template.json'), 'utf8') }
    assert.notEqual(old.id, 0n)
    damage(t)
    await runOnce(env)
    assert.equal(templates(cache).length, 1)
    const [t2] = templates(cache)
    const text = fs.readFileSync(path.join(t2, 'template.json'), 'utf8')
    assert.notEqual(text, old.text, 'a new template')
    assert.notEqual(systemId(path.join(t2, 'data')), old.id, 'built by a new initdb')
    assert.deepEqual((await cacheJson(env)).templates.map((x) => x.state), ['ok'])
    // The rebuilt template is used as it is.
    await runOnce(env)
    assert.equal(fs.readFileSync(path.join(t2, 'template.json'), 'utf8'), text)
    assert.deepEqual(fs.readdirSync(cache).filter((n) => n.startsWith('.')), [], 'no build or trash folder left')
  })
}

test('three concurrent first runs all succeed and leave exactly one template', async () => {
  const { env, cache } = freshHome()
  const rs = await Promise.all([1, 2, 3].map(() => race(['run', 'advisory', '--n', '5', '--max-pending', '3'], { env })))
  for (const r of rs) {
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assert.match(r.stdout, /MATCH/)
    assert.deepEqual(runDirsOf(r.pid), [])
  }
  assert.equal(templates(cache).length, 1)
  assert.deepEqual(fs.readdirSync(cache).filter((n) => n.startsWith('.')), [], 'the losers removed their copies')
  assert.deepEqual((await cacheJson(env)).templates.map((x) => x.state), ['ok'])
})

test('a build folder left by a run killed mid-build is removed by the next run; a live one is left alone', async () => {
  const { env, cache } = freshHome()
  await runOnce(env)
  const dead = spawnSync('true').pid!
  const stale = path.join(cache, `.build-${dead}-abcdef`)
  const live = path.join(cache, `.build-${process.pid}-abcdef`)
  for (const d of [stale, live]) fs.mkdirSync(path.join(d, 'data'), { recursive: true })
  assert.deepEqual((await cacheJson(env)).building.sort(), [stale, live].sort())
  await runOnce(env)
  assert.equal(fs.existsSync(stale), false, 'the dead run\'s build folder is removed')
  assert.equal(fs.existsSync(live), true, 'a running process\'s build folder is not touched')
})

test('race cache clear removes the folder; a second clear has nothing to remove', async () => {
  const { env, cache } = freshHome()
  await runOnce(env)
  assert.equal(templates(cache).length, 1)
  const r = await race(['cache', 'clear', '--json'], { env })
  assert.equal(r.code, 0, r.stderr)
  const doc = JSON.parse(r.stdout)
  assert.equal(doc.removed, true)
  assert.equal(doc.templates, 1)
  assert.equal(fs.existsSync(cache), false)
  assert.equal((await cacheJson(env)).state, 'absent')
  const again = await race(['cache', 'clear'], { env })
  assert.equal(again.code, 0)
  assert.match(again.stdout, /nothing to remove/)
})

test("a cache folder that is not the user's (another owner, a symbolic link) is never used nor removed", { skip: process.getuid?.() !== 0 && 'chown needs root' }, async () => {
  const { env, cache } = freshHome()
  fs.mkdirSync(cache, { mode: 0o700 })
  const postgresUid = Number(fs.readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith('postgres:'))?.split(':')[2] ?? 1)
  fs.chownSync(cache, postgresUid, postgresUid)
  await runOnce(env)
  assert.deepEqual(fs.readdirSync(cache), [], 'nothing written into it')
  const doc = await cacheJson(env)
  assert.equal(doc.state, 'refused')
  assert.match(doc.why!, /belongs to uid/)
  const clear = await race(['cache', 'clear'], { env })
  assert.equal(clear.code, 3)
  assert.match(clear.stderr, /^race: .* is not race's to remove: it belongs to uid \d+/)
  assert.ok(fs.existsSync(cache))

  const other = freshHome()
  const target = fs.mkdtempSync(path.join(os.tmpdir(), 'race-cache-target-'))
  made.push(target)
  fs.symlinkSync(target, other.cache)
  await runOnce(other.env)
  assert.deepEqual(fs.readdirSync(target), [], 'nothing written through the link')
  assert.equal((await cacheJson(other.env)).why, 'it is a symbolic link')
})

test("race cache clear leaves alone the copy of a fetched PostgreSQL that a live run's server runs from (race as root)", { skip: process.getuid?.() !== 0 ? 'the copies are made for root only' : process.env.DATABASE_URL ? 'the --pg runs are on the first pass (no DATABASE_URL)' : false }, async () => {
  const server = await startEmbedded({ pg: 16 })
  try {
    const from = mirrors().find((m) => m.includes('16.'))
    assert.ok(from, 'the server runs from a copy in the temporary folder')
    const r = await race(['cache', 'clear', '--json'], { env: freshHome().env })
    assert.equal(r.code, 0, r.stderr)
    assert.equal(fs.existsSync(from), true, 'the live server\'s copy is left')
    const sql = postgres(server.url, { max: 1, onnotice: () => {} })
    try {
      // A new connection loads the time zone files from the copy's share folder: they must still be there.
      assert.equal((await sql`select current_setting('server_version_num')::int / 10000 as major`)[0].major, 16)
      await sql`set timezone = 'America/Los_Angeles'`
    } finally {
      await sql.end({ timeout: 1 })
    }
  } finally {
    await server.stop()
  }
})

test('as root, a damaged copy of a fetched PostgreSQL (a file deleted, truncated or rewritten) is reported by race cache and made again by the next run', { skip: process.getuid?.() !== 0 ? 'the copies are made for root only' : process.env.DATABASE_URL ? 'the --pg runs are on the first pass (no DATABASE_URL)' : false }, async () => {
  // The copies go to a temporary folder of this test's own (TMPDIR): the shared one's copies may be in use by
  // other runs. The fetched 16 is the user's cache's, as in versions.test.ts (fetched once per machine).
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'race-mirror-test-'))
  made.push(tmp)
  fs.chmodSync(tmp, 0o755)
  const env = { TMPDIR: tmp }
  const run = async () => {
    const r = await race(['run', 'advisory', '--pg', '16', '--n', '5', '--max-pending', '3'], { env, timeoutMs: 10 * 60_000 })
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assert.match(r.stdout, /PostgreSQL 16\.\d+ \(embedded\)/)
    assert.match(r.stdout, /MATCH/)
  }
  const listed = async () => {
    const r = await race(['cache', '--json'], { env })
    assert.equal(r.code, 0, r.stderr)
    const doc = JSON.parse(r.stdout) as { mirrors: { path: string; state: string; seenByRuns?: boolean }[] }
    assert.equal(doc.mirrors.length, 1, JSON.stringify(doc.mirrors))
    const text = await race(['cache'], { env })
    return { ...doc.mirrors[0], text: text.stdout }
  }
  await run()
  const first = await listed()
  assert.equal(first.state, 'ok')
  assert.match(first.text.replace(/\s+/g, ' '), /copy of 16\.[^ ]+ for the postgres user: .*whole/)
  const native = path.join(first.path, 'native')
  const plpgsql = path.join(native, 'lib', 'postgresql', 'plpgsql.so')
  const postgresBin = path.join(native, 'bin', 'postgres')

  fs.rmSync(plpgsql)
  let m = await listed()
  assert.match(m.state, /plpgsql\.so is missing/)
  assert.equal(m.seenByRuns, true)
  assert.match(m.text.replace(/\s+/g, ' '), /DAMAGED: native\/lib\/postgresql\/plpgsql\.so is missing; the next run that needs it makes it again/)
  await run()
  assert.ok(fs.existsSync(plpgsql), 'made again')
  assert.equal((await listed()).state, 'ok')

  const size = fs.statSync(postgresBin).size
  fs.truncateSync(postgresBin, Math.floor(size / 2))
  m = await listed()
  assert.match(m.state, new RegExp(`bin/postgres has ${Math.floor(size / 2)} bytes, the build's has ${size}`))
  await run()
  assert.equal(fs.statSync(postgresBin).size, size, 'made again')

  // Rewritten in place, same size, its mtime put back: the change time still tells.
  const st = fs.statSync(plpgsql)
  const fd = fs.openSync(plpgsql, 'r+')
  fs.writeSync(fd, Buffer.from('damage'), 0, 6, 4096)
  fs.closeSync(fd)
  fs.utimesSync(plpgsql, st.atime, st.mtime)
  m = await listed()
  assert.match(m.state, /plpgsql\.so (differs from the build's|was changed after the copy was made)/)
  assert.equal(m.seenByRuns, true)
  await run()
  assert.equal((await listed()).state, 'ok')
})
