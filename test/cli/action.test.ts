// action.yml, run here the way a GitHub runner runs a composite action: its YAML parsed, each `run:` step given to
// bash as the runner does (bash --noprofile --norc -eo pipefail), its `${{ inputs.* }}` and `${{ steps.*.outputs.* }}`
// substituted, its env set, GITHUB_OUTPUT read back between steps, GITHUB_ACTIONS=true, in a workspace that is a
// project with racelab installed (node_modules/.bin/race: this checkout). A passing and a failing case, for race
// check and race explore: the exit code, the JUnit file (valid against the schema), the HTML page and the
// annotations on the failing race file. The upload step (actions/upload-artifact) runs on GitHub only: the test
// checks it uploads the report folder, always.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import { ROOT, useServer, type TestServer } from '../support/server.js'
import { NEEDS, junitProblems, parseYaml } from '../support/tools.js'

interface Step {
  id?: string
  name?: string
  if?: string
  shell?: string
  run?: string
  uses?: string
  env?: Record<string, string>
  with?: Record<string, string>
}
interface Action {
  inputs: Record<string, { default?: string; required?: boolean }>
  outputs: Record<string, { value: string }>
  runs: { using: string; steps: Step[] }
}

let server: TestServer
before(async () => {
  server = await useServer()
})
after(async () => {
  await server?.stop()
})

const action = (): Action => parseYaml(fs.readFileSync(path.join(ROOT, 'action.yml'), 'utf8')) as Action

/** `${{ ... }}` as the runner substitutes it: inputs (given, else their default) and earlier steps' outputs. */
function substitute(text: string, inputs: Record<string, string>, outputs: Record<string, Record<string, string>>): string {
  return text.replace(/\$\{\{\s*(.*?)\s*\}\}/g, (_, expr: string) => {
    const i = /^inputs\.([\w-]+)$/.exec(expr)
    if (i) {
      assert.ok(i[1] in inputs, `action.yml uses an input it does not declare: ${i[1]}`)
      return inputs[i[1]]
    }
    const o = /^steps\.([\w-]+)\.outputs\.([\w-]+)$/.exec(expr)
    if (o) return outputs[o[1]]?.[o[2]] ?? ''
    throw new Error(`an expression this test does not evaluate: ${expr}`)
  })
}

interface Ran {
  code: number
  log: string
  outputs: Record<string, Record<string, string>>
  skipped: Step[]
}

/** Runs the action's steps in `ws` with `given` inputs; a `uses:` step is left out (recorded), as a failed step's followers unless `if: always()`. */
function runAction(ws: string, given: Record<string, string>): Ran {
  const a = action()
  const inputs = Object.fromEntries(Object.entries(a.inputs).map(([k, v]) => [k, given[k] ?? v.default ?? '']))
  for (const k of Object.keys(given)) assert.ok(k in a.inputs, `no input ${k}`)
  const outputs: Record<string, Record<string, string>> = {}
  const temp = fs.mkdtempSync(path.join(os.tmpdir(), 'race-runner-'))
  const base: NodeJS.ProcessEnv = { ...process.env, GITHUB_ACTIONS: 'true', CI: 'true', NO_COLOR: '1', RUNNER_TEMP: temp, GITHUB_WORKSPACE: ws }
  for (const k of ['DATABASE_URL', 'PGHOST', 'PGDATABASE', 'PGUSER', 'PGPORT', 'PGPASSWORD', 'COLUMNS']) delete base[k]
  let code = 0
  let log = ''
  const skipped: Step[] = []
  try {
    for (const [n, step] of a.runs.steps.entries()) {
      if (code !== 0 && step.if !== 'always()') continue
      if (step.uses) {
        skipped.push(step)
        continue
      }
      assert.equal(step.shell, 'bash', `${step.name}: a composite action's run step names its shell`)
      const out = path.join(temp, `output-${n}`)
      fs.writeFileSync(out, '')
      const env = { ...base, GITHUB_OUTPUT: out, ...Object.fromEntries(Object.entries(step.env ?? {}).map(([k, v]) => [k, substitute(String(v), inputs, outputs)])) }
      const script = path.join(temp, `step-${n}.sh`)
      fs.writeFileSync(script, substitute(step.run!, inputs, outputs))
      const r = spawnSync('bash', ['--noprofile', '--norc', '-eo', 'pipefail', script], { cwd: ws, env, encoding: 'utf8', timeout: 300_000 })
      log += `## ${step.name}\n${r.stdout}${r.stderr}`
      if (step.id) outputs[step.id] = Object.fromEntries(fs.readFileSync(out, 'utf8').split('\n').filter((l) => l.includes('=')).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]))
      if (r.status !== 0) code = r.status ?? 3
    }
  } finally {
    fs.rmSync(temp, { recursive: true, force: true })
  }
  return { code, log, outputs, skipped }
}

/** A project's checkout: its race files, and racelab installed (node_modules/.bin/race, this checkout's). */
function workspace(files: Record<string, string>): string {
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'race-action-'))
  fs.mkdirSync(path.join(ws, 'node_modules', '.bin'), { recursive: true })
  fs.symlinkSync(path.join(ROOT, 'bin', 'race'), path.join(ws, 'node_modules', '.bin', 'race'))
  fs.mkdirSync(path.join(ws, 'races'))
  for (const [name, from] of Object.entries(files)) fs.copyFileSync(path.join(ROOT, 'examples', from), path.join(ws, 'races', name))
  return ws
}

const annotations = (log: string) => log.split('\n').filter((l) => l.startsWith('::error'))

test('action.yml is a composite action: its inputs, a bash step for each run, the reports uploaded always', { skip: NEEDS.pyyaml }, () => {
  const a = action()
  assert.equal(a.runs.using, 'composite')
  assert.deepEqual(Object.keys(a.inputs).sort(), ['args', 'artifact-name', 'command', 'database-url', 'files', 'racelab-version', 'report-dir'])
  const upload = a.runs.steps.find((s) => s.uses?.startsWith('actions/upload-artifact@'))
  assert.ok(upload, 'an upload-artifact step')
  assert.equal(upload.if, 'always()', 'the reports of a failing run are uploaded too')
  assert.equal(upload.with?.path, '${{ inputs.report-dir }}')
  assert.match(a.outputs['exit-code'].value, /steps\.race\.outputs\.exit-code/)
  // In the package, so that a project's workflow can use ./node_modules/racelab after npm ci.
  assert.ok((JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).files as string[]).includes('action.yml'))
})

test("docs/ci.md's workflows for the action parse, use it from the project's racelab, and give it only inputs it has", { skip: NEEDS.pyyaml }, () => {
  const a = action()
  const md = fs.readFileSync(path.join(ROOT, 'docs', 'ci.md'), 'utf8')
  const section = md.slice(md.indexOf('## The GitHub Action'))
  const blocks = [...section.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => parseYaml(m[1]) as { jobs: Record<string, { steps: Step[]; services?: Record<string, { image: string }> }> })
  assert.equal(blocks.length, 2)
  const uses = blocks.map((wf) => Object.values(wf.jobs)[0])
  for (const job of uses) {
    const step = job.steps.find((s) => s.uses === './node_modules/racelab')
    assert.ok(step, 'a step uses the action')
    assert.ok(job.steps.indexOf(step) > job.steps.findIndex((s) => s.run === 'npm ci'), 'after npm ci installed it')
    for (const k of Object.keys(step.with ?? {})) assert.ok(k in a.inputs, `docs/ci.md gives the action an input it does not have: ${k}`)
  }
  // One against a PostgreSQL service container, one on the embedded server (no database-url, no service).
  assert.match(uses[0].services!.postgres.image, /^postgres:\d+/)
  assert.match(uses[0].steps.find((s) => s.uses === './node_modules/racelab')!.with?.['database-url'] ?? '', /^postgres:\/\/postgres:postgres@localhost:5432\/postgres$/)
  assert.equal(uses[1].services, undefined)
  assert.equal(uses[1].steps.find((s) => s.uses === './node_modules/racelab')!.with?.['database-url'], undefined)
})

test('race check through the action: passing on the service (exit 0, JUnit, no annotation); failing on the embedded server (exit 1, the failing file annotated)', { skip: NEEDS.pyyaml || NEEDS.xmllint, timeout: 600_000 }, () => {
  const ws = workspace({ 'orders.spec': 'orders.spec', 'orders-fixed.spec': 'orders-fixed.spec', 'explore-orders.spec': 'explore-orders.spec' })
  try {
    // The workflow's PostgreSQL service: database-url.
    const ok = runAction(ws, { command: 'check', files: 'races/orders.spec races/orders-fixed.spec', 'database-url': server.url })
    assert.equal(ok.code, 0, ok.log)
    assert.equal(ok.outputs.race['exit-code'], '0')
    assert.deepEqual(annotations(ok.log), [])
    const xml = path.join(ws, 'race-reports', 'race-check.xml')
    assert.equal(junitProblems(xml), '')
    assert.match(fs.readFileSync(xml, 'utf8'), /<testsuite name="race check" tests="2" failures="0" errors="0"/)
    assert.deepEqual(ok.skipped.map((s) => s.uses?.split('@')[0]), ['actions/upload-artifact'])
    // The embedded server (no database-url): explore-orders.spec says expect held, and lockstep violates it.
    const bad = runAction(ws, { command: 'check', files: 'races/explore-orders.spec', 'report-dir': 'out' })
    assert.equal(bad.code, 1, bad.log)
    assert.equal(bad.outputs.race['exit-code'], '1')
    const notes = annotations(bad.log)
    assert.equal(notes.length, 1, bad.log)
    assert.match(notes[0], /^::error file=races\/explore-orders\.spec,title=race check%3A explore-orders \(default\)::--expect held, but the invariant was violated/)
    const failed = path.join(ws, 'out', 'race-check.xml')
    assert.equal(junitProblems(failed), '')
    assert.match(fs.readFileSync(failed, 'utf8'), /failures="1"[\s\S]*<failure message=/)
    assert.deepEqual(bad.skipped.map((s) => s.uses?.split('@')[0]), ['actions/upload-artifact'], 'the upload runs after a failure')
  } finally {
    fs.rmSync(ws, { recursive: true, force: true })
  }
})

test('race explore through the action on the embedded server: a violating file fails (JUnit failure, HTML page, annotation on the file), a held one passes, none is bad input', { skip: NEEDS.pyyaml || NEEDS.xmllint, timeout: 600_000 }, () => {
  const ws = workspace({ 'explore-orders.spec': 'explore-orders.spec', 'orders.spec': 'orders.spec' })
  try {
    // orders.spec expects violated, explore-orders.spec held: the same race, one fails.
    const r = runAction(ws, { command: 'explore', files: 'races/orders.spec\nraces/explore-orders.spec' })
    assert.equal(r.code, 1, r.log)
    const notes = annotations(r.log)
    assert.equal(notes.length, 1, r.log)
    assert.match(notes[0], /^::error file=races\/explore-orders\.spec,title=race explore races\/explore-orders\.spec::expected held, but VIOLATED in \d+ of \d+ interleavings/)
    const dir = path.join(ws, 'race-reports')
    for (const name of ['explore-races-orders.spec', 'explore-races-explore-orders.spec']) {
      assert.equal(junitProblems(path.join(dir, `${name}.xml`)), '', name)
      const page = fs.readFileSync(path.join(dir, `${name}.html`), 'utf8')
      assert.match(page, /^<!doctype html>/)
      assert.doesNotMatch(page, /<script|<link|src=|href=/i)
    }
    assert.match(fs.readFileSync(path.join(dir, 'explore-races-orders.spec.xml'), 'utf8'), /failures="0" errors="0"/)
    const failing = fs.readFileSync(path.join(dir, 'explore-races-explore-orders.spec.xml'), 'utf8')
    assert.match(failing, /failures="1"[\s\S]*<failure message="expected held, but VIOLATED/)
    assert.match(failing, /race run races\/explore-orders\.spec --schedule/)
    assert.match(fs.readFileSync(path.join(dir, 'explore-races-explore-orders.spec.html'), 'utf8'), /<table class="lanes" id="shortest">/)
    // No files to explore, or none that a glob matches: bad input, said as an annotation.
    const none = runAction(ws, { command: 'explore' })
    assert.equal(none.code, 2, none.log)
    assert.match(annotations(none.log)[0] ?? '', /explore needs the race files/)
    const unmatched = runAction(ws, { command: 'check', files: 'races/*.race.mjs' })
    assert.equal(unmatched.code, 2, unmatched.log)
    assert.deepEqual(annotations(unmatched.log), ['::error title=racelab::no file matches files: races/*.race.mjs'])
  } finally {
    fs.rmSync(ws, { recursive: true, force: true })
  }
})
