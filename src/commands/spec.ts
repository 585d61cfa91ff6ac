// race spec FILE.spec ...: PostgreSQL's isolationtester without a PostgreSQL build. Each spec runs in a
// schema of its own on the target (embedded PostgreSQL 18 by default) and prints the transcript
// isolationtester prints; --results writes DIR/<name>.out, --expected compares with DIR/<name>.out (or an
// alternate <name>_1.out ... as pg_regress accepts) and prints ok / FAILED and the differences.
import { Lab } from '../db/lab.js'
import fs from 'node:fs'
import path from 'node:path'
import type { Command } from 'commander'
import { RunError, UsageError } from '../errors.js'
import { isConnectionLoss } from '../db/sqlstate.js'
import { abortSignal, onCleanup, whenAborted } from '../lifecycle.js'
import { parseDuration, parseWhole } from '../parse.js'
import { c } from '../report/color.js'
import { diffLines } from '../spec/diff.js'
import { libpqEnv, readSpec, specName } from '../spec/files.js'
import { guardedBlock } from '../spec/guarded.js'
import { expandTemplates, hasTemplate, type Spec } from '../spec/parse.js'
import { countPermutations, runTester } from '../spec/tester.js'
import { addTargetOptions, eachPg, parseBounds, withLab, type TargetOptions } from './common.js'

export interface SpecOptions extends TargetOptions {
  results?: string
  expected?: string
  n?: string
  keep?: boolean
}

export function registerSpec(program: Command, exit: (code: number) => void): Command {
  const cmd = program
    .command('spec')
    .description("run isolation-test spec files as PostgreSQL's isolationtester does, with the same transcript")
    .argument('<files...>', 'spec files (PostgreSQL isolation-test format)')
    .option('--results <dir>', 'write each transcript to DIR/<name>.out instead of printing it')
    .option('--expected <dir>', 'compare each transcript with DIR/<name>.out (or <name>_1.out ...): ok or FAILED, and the differences')
    .option('--n <n>', 'sessions each template session (session s*) becomes (default 2)')
  addTargetOptions(cmd, { stepTimeout: false, pg: true })
  const runTimeout = cmd.options.find((x) => x.long === '--run-timeout')
  if (runTimeout) runTimeout.default('30m')
  cmd.action(async (files: string[], o: SpecOptions) => exit(await eachPg(o, () => specCommand(files, o))))
  cmd.addHelpText(
    'after',
    `
Like libpq, race reads PGOPTIONS, PGDATESTYLE, PGTZ and PGAPPNAME (pg_regress runs isolation tests with
PGDATESTYLE='Postgres, MDY', PGTZ=PST8PDT and PGAPPNAME=isolation/<test>). A step is cancelled as the
server's own isolationtester would cancel it: after twice PG_TEST_TIMEOUT_DEFAULT seconds on PostgreSQL 16 and
later (default 360 s), after PGISOLATIONTIMEOUT seconds before (default 300 s). Each spec runs in a schema race creates and drops; a setup
or teardown block that would change anything outside it is refused (exit 2) and rolled back.

Examples:
  $ race spec orders.spec
  $ race spec specs/*.spec --results out/
  $ race spec specs/*.spec --expected expected/ --database-url postgres://postgres@127.0.0.1:5432/test`,
  )
  return cmd
}

interface Outcome {
  file: string
  name: string
  text: string
  exit: 0 | 1
  ms: number
}

export async function specCommand(files: string[], o: SpecOptions): Promise<number> {
  const n = o.n === undefined ? 2 : parseWhole('--n', o.n, 1, 1000)
  const specs: Spec[] = files.map((f) => expandTemplates(readSpec(f), n))
  for (const s of specs) {
    if (!s.permutations.length && countPermutations(s) > 100_000) {
      throw new UsageError(`${s.file}: without permutation lines it has ${countPermutations(s)} interleavings to run: add permutation lines${hasTemplate(readSpec(s.file)) ? ' or use a smaller --n' : ''}`)
    }
  }
  for (const dir of [o.results, o.expected]) {
    if (dir !== undefined && !fs.statSync(dir, { throwIfNoEntry: false })?.isDirectory()) {
      if (dir === o.results) fs.mkdirSync(dir, { recursive: true })
      else throw new UsageError(`--expected ${dir} is not a directory`)
    }
  }
  const bounds = parseBounds(o)
  const env = libpqEnv()
  const streaming = o.results === undefined && o.expected === undefined && !o.json
  return withLab(o.databaseUrl, bounds, async (driver) => {
    // isolationtester's format is PostgreSQL's: its SQL, its messages, pg_isolation_test_session_is_blocked.
    if (!(driver instanceof Lab)) throw new UsageError(`race spec runs on PostgreSQL: give a postgres:// URL (or none, for the embedded PostgreSQL 18)`)
    const lab = driver
    const maxStepWaitMs = stepWait(lab.server.versionNum)
    const outcomes: Outcome[] = []
    for (const spec of specs) {
      const name = specName(spec.file)
      const started = performance.now()
      if (lab.controlLost) throw new RunError(`${spec.file}: lost race's control connection to ${lab.target.label} before the spec started (CONNECTION_CLOSED): something ended it; nothing of this spec ran`)
      const schema = await lab.createSchema('spec', Boolean(o.keep))
      let text = ''
      // Set when race's control connection is lost: the transcript ends there too (what the sessions say as race
      // ends them is not part of it).
      let stopped = false
      // Once the run is aborted (Ctrl-C, --run-timeout), the transcript ends: what the ended sessions still say is not part of it.
      const sink = {
        out: (s: string) => {
          if (abortSignal.aborted || stopped) return
          text += s
          if (streaming) process.stdout.write(Buffer.from(s, 'latin1'))
        },
        err: (s: string) => {
          if (abortSignal.aborted || stopped) return
          text += s
          if (streaming) process.stderr.write(Buffer.from(s, 'latin1'))
        },
      }
      let pids: number[] = []
      const terminate = async () => {
        if (pids.length) await lab.onControlOrFresh((sql) => sql`select pg_terminate_backend(pid) from unnest(${pids}::int[]) as pid where pid <> pg_backend_pid()`).catch(() => {})
      }
      // On Ctrl-C or --run-timeout, end this spec's backends (a step may be waiting on a lock), then drop the schema.
      const release = onCleanup('spec sessions', terminate)
      let result: { exit: 0 | 1 } | undefined
      try {
        result = await Promise.race([
          runTester(
            spec,
            {
              target: lab.target,
              connectTimeoutMs: bounds.connectTimeoutMs,
              params: [...env.params, ['search_path', schema.name]],
              appName: env.appName,
              maxStepWaitMs,
              block: (control, sql, kind, index) =>
                guardedBlock(control, sql, schema.name, kind === 'setup' ? `${spec.file}:${spec.setup[index].pos.line}: setup block ${index + 1}` : `${spec.file}:${spec.teardown!.pos.line}: teardown block`),
              onBackends: (p) => (pids = p),
            },
            sink,
          ),
          whenAborted(),
          // race's own control backend marks the schema as this live run's: without it, the next race command
          // would take the schema for a killed run's and drop it under the sessions. So the run stops.
          lab.whenLost().catch((e: unknown) => {
            stopped = true
            throw e
          }),
        ])
      } catch (e) {
        if (!abortSignal.aborted && isConnectionLoss(e) && lab.controlLost) {
          const code = (e as { code?: string }).code
          throw new RunError(`${spec.file}: lost race's control connection to ${lab.target.label} mid-run (${code}): something ended it; the spec stopped, its sessions were ended and its schema dropped`)
        }
        throw e
      } finally {
        release()
        if (!result) await terminate()
        schema.release()
        const left = await schema.drop()
        if (left) throw new UsageError(left.note)
        if (o.keep) process.stderr.write(`race: ${spec.file}: schema ${schema.name} kept (--keep): drop schema "${schema.name}" cascade\n`)
      }
      outcomes.push({ file: spec.file, name, text, exit: result.exit, ms: Math.round(performance.now() - started) })
      if (o.results !== undefined) fs.writeFileSync(path.join(o.results, `${name}.out`), Buffer.from(text, 'latin1'))
    }
    const json = (verdicts?: Record<string, boolean>) => {
      const results = outcomes.map((x) => ({ spec: x.file, name: x.name, transcript: Buffer.from(x.text, 'latin1').toString('utf8'), exitCode: x.exit, ms: x.ms, ...(verdicts ? { matched: verdicts[x.name] } : {}) }))
      process.stdout.write(JSON.stringify({ server: { version: lab.server.version }, target: lab.target.label, results }, null, 2) + '\n')
    }
    if (o.expected === undefined) {
      if (o.json) json()
      return outcomes.some((x) => x.exit) ? 1 : 0
    }
    const verdicts: Record<string, boolean> = {}
    let failed = 0
    const diffs: string[] = []
    for (const x of outcomes) {
      const candidates = [`${x.name}.out`, ...Array.from({ length: 9 }, (_, i) => `${x.name}_${i + 1}.out`)]
        .map((f) => path.join(o.expected!, f))
        .filter((f) => fs.existsSync(f))
      if (!candidates.length) throw new UsageError(`--expected ${o.expected} has no ${x.name}.out`)
      const texts = candidates.map((f) => fs.readFileSync(f, 'latin1'))
      const ok = texts.includes(x.text)
      verdicts[x.name] = ok
      if (!ok) {
        failed++
        // The closest expected file, as pg_regress shows the alternate with the fewest differing lines.
        const ranked = texts.map((t, i) => ({ i, d: diffLines(t, x.text, candidates[i], `${x.name} (race)`) })).sort((a, b) => a.d.changed - b.d.changed)
        diffs.push(ranked[0].d.text)
      }
      if (!o.json) process.stdout.write(`${x.name.padEnd(24)} ... ${ok ? c.green('ok') : c.red('FAILED')}  ${x.ms} ms\n`)
    }
    if (o.json) {
      json(verdicts)
      return failed ? 1 : 0
    }
    for (const d of diffs) process.stdout.write(Buffer.from(d, 'latin1'))
    process.stdout.write(failed ? c.red(`${failed} of ${outcomes.length} specs differ from ${o.expected}\n`) : c.green(`all ${outcomes.length} specs as expected\n`))
    return failed ? 1 : 0
  })
}

/**
 * How long a step may run before isolationtester cancels it, as the isolationtester of the server's version
 * reads it: PostgreSQL 16 and later take twice PG_TEST_TIMEOUT_DEFAULT seconds (default 360 s), earlier
 * versions PGISOLATIONTIMEOUT seconds (default 300 s).
 */
export function stepWait(versionNum: number, env: NodeJS.ProcessEnv = process.env): number {
  if (versionNum >= 160000) {
    const v = env.PG_TEST_TIMEOUT_DEFAULT
    return v !== undefined ? 2 * (Number.parseInt(v, 10) || 0) * 1000 : 360_000
  }
  const v = env.PGISOLATIONTIMEOUT
  return v !== undefined ? (Number.parseInt(v, 10) || 0) * 1000 : 300_000
}

export { parseDuration }
