// docs/ci.md's GitHub Actions workflow, run here step by step: its YAML parses, and its `run:` steps, in a fresh
// copy of the project (the checkout), with DATABASE_URL pointing at this test's server (the postgres service) and
// GITHUB_ACTIONS=true, exit 0 and leave valid JUnit files. `npm ci` runs offline, from npm's cache: tests do not
// reach the registry.
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import { ROOT, useServer, type TestServer } from '../support/server.js'
import { NEEDS, junitProblems } from '../support/tools.js'

let server: TestServer
before(async () => {
  server = await useServer()
})
after(async () => {
  await server?.stop()
})

function workflow(): string {
  const md = fs.readFileSync(path.join(ROOT, 'docs', 'ci.md'), 'utf8')
  const m = /```yaml\n(name: race[\s\S]*?)```/.exec(md)
  assert.ok(m, 'docs/ci.md has the workflow')
  return m[1]
}

const pythonYaml = spawnSync('python3', ['-c', 'import yaml'], { encoding: 'utf8' }).status === 0

test('the workflow is YAML a runner can read: a postgres service, Node 20, race check with --junit (./bin/race in its own checkout)', { skip: pythonYaml ? false : 'needs python3 with PyYAML to parse the YAML (Debian: apt-get install -y python3-yaml)' }, () => {
  const json = execFileSync('python3', ['-c', 'import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin.read())))'], { input: workflow(), encoding: 'utf8' })
  const wf = JSON.parse(json)
  const job = Object.values(wf.jobs as Record<string, { services: Record<string, { image: string }>; steps: { run?: string; uses?: string; with?: Record<string, unknown> }[]; env: Record<string, string> }>)[0]
  assert.match(job.services.postgres.image, /^postgres:\d+/)
  assert.match(job.env.DATABASE_URL, /^postgres:\/\/postgres:postgres@localhost:5432\/postgres$/)
  assert.ok(job.steps.some((s) => s.uses?.startsWith('actions/setup-node') && String(s.with?.['node-version']) === '20'))
  assert.ok(job.steps.some((s) => /^(npx race|\.\/bin\/race) check --database-url "\$DATABASE_URL" --junit \S+\.xml$/.test(s.run ?? '')))
})

function offlineCache(): string | false {
  const r = spawnSync('npm', ['cache', 'ls'], { encoding: 'utf8' })
  return r.status === 0 || fs.existsSync(path.join(os.homedir(), '.npm', '_cacache')) ? false : "needs npm's cache (npm ci ran here before) to run npm ci offline"
}

test("the workflow's steps, run here: npm ci, then each npx race step against the service, exit 0 and valid JUnit", { timeout: 900_000, skip: NEEDS.xmllint || offlineCache() }, () => {
  const runs = [...workflow().matchAll(/^ *- run: (.*)$/gm)].map((m) => m[1])
  assert.deepEqual(runs.slice(0, 1), ['npm ci'])
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-workflow-'))
  try {
    // actions/checkout: the project's files (what git tracks; not node_modules or dist).
    for (const f of ['src', 'scenarios', 'test', 'speed', 'scripts', 'bin', 'package.json', 'package-lock.json', 'tsconfig.json', 'README.md']) fs.cpSync(path.join(ROOT, f), path.join(dir, f), { recursive: true })
    const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: server.url, GITHUB_ACTIONS: 'true', CI: 'true', NO_COLOR: '1' }
    for (const k of ['PGHOST', 'PGDATABASE', 'PGUSER', 'PGPORT', 'PGPASSWORD', 'COLUMNS']) delete env[k]
    for (const run of runs) {
      const line = run === 'npm ci' ? 'npm ci --offline --no-audit --no-fund' : run
      const r = spawnSync('sh', ['-c', line], { cwd: dir, env, encoding: 'utf8', timeout: 600_000 })
      assert.equal(r.status, 0, `$ ${line}\n${r.stdout}${r.stderr}`)
      if (/^(npx race|\.\/bin\/race)\b/.test(run)) assert.doesNotMatch(r.stdout, /^::error/m, 'nothing to annotate: the service behaves as documented')
    }
    const xmls = fs.readdirSync(dir).filter((f) => f.endsWith('.xml'))
    assert.ok(xmls.length >= 1)
    for (const f of xmls) assert.equal(junitProblems(path.join(dir, f)), '', f)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})
