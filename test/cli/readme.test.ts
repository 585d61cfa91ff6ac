// The README stands alone and tells the truth: no paths outside the package, the articles by their English
// titles, `./bin/race` (or `npx race` in a project) in its commands, and every sample is what race prints today (re-run and compared, after
// normalising what legitimately varies: pids, timings, versions, ports, random names).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ARTICLES } from '../../src/registry.js'
import { argv, drift, parseSamples, readme, render, tableHeads, type Sample } from '../../scripts/samples.js'
import { race, useServer, type TestServer } from '../support/server.js'
import { NEEDS } from '../support/tools.js'
import { after, before } from 'node:test'

let server: TestServer
before(async () => {
  server = await useServer()
})
after(async () => {
  await server?.stop()
})

const md = readme()
const samples = parseSamples(md)

test('the README stands alone: no ../shared, no design notes, no untranslated text; commands through ./bin/race or npx', () => {
  assert.doesNotMatch(md, /\.\.\/shared|seeds\/|DESIGN\.md/)
  assert.doesNotMatch(md, /[\u3040-\u30ff\u3400-\u9fff\uff00-\uffef]/, 'every citation in English')
  const flat = md.replace(/\s+/g, ' ')
  // The articles by their English titles (as the registry names them), and sections by number or heading.
  for (const title of Object.values(ARTICLES)) assert.ok(flat.includes(title), title)
  assert.match(flat, /section "Performance impact", "Benchmark ratios"/)
  const commands = [...md.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((m) => m[1].split('\n'))
  assert.ok(commands.length > 10)
  const bare = commands.filter((l) => /^(\$ )?race\b/.test(l.trim()))
  assert.deepEqual(bare, [], 'a command line starts with ./bin/race, or npx race in a project (race is not on PATH after npm install)')
  // The set-up's first race is this checkout's: never npx in the checkout (npm copies and rebuilds it first), never
  // a registry package (the registry's race is someone else's).
  const setup = md.slice(md.indexOf('## Set-up'), md.indexOf('## Add race to your project'))
  assert.match(setup, /```sh\nnpm install\n\.\/bin\/race run advisory --n 5 --max-pending 3\n```/)
  assert.deepEqual(commands.filter((l) => /\bnpm (install|i|exec)\b.*\srace(\s|$)|\bnpx race@/.test(l)), [], 'no command installs the registry package named race')
})

test('every sample marker has its output written under it, and names a command race has', async () => {
  assert.ok(samples.length >= 12, `${samples.length} samples`)
  const empty = samples.filter((s) => !s.text.trim()).map((s) => s.command)
  assert.deepEqual(empty, [], 'run npm run readme to fill them')
  const help = await race(['--help'])
  for (const s of samples) {
    const cmd = argv(s.command)[1]
    assert.ok(help.stdout.includes(`  ${cmd} `), `${s.command}: race has no command ${cmd}`)
  }
})

/** Re-runs a sample as the README says; a race (unordered) may take a documented alternative: 3 tries. */
async function check(s: Sample): Promise<string> {
  let d = ''
  const o = { unordered: 'unordered' in s.options, anySession: 'any-session' in s.options }
  const tries = Number(s.options.tries?.[0] ?? (o.unordered || o.anySession ? 3 : 1))
  for (let i = 0; i < tries; i++) {
    d = drift(s.text, await render(s), o)
    if (!d) return ''
  }
  return `${s.command}: ${d}`
}

test('every sample is what race prints today (npm run readme rewrites them)', { timeout: 600_000 }, async (t) => {
  const drifted: string[] = []
  for (const s of samples.filter((x) => !('recorded' in x.options))) {
    if (s.options.keys && NEEDS.tmux) {
      t.diagnostic(`skipped ${s.command}: ${NEEDS.tmux}`)
      continue
    }
    if (/--pooler\b/.test(s.command) && NEEDS.pgbouncer) {
      t.diagnostic(`skipped ${s.command}: ${NEEDS.pgbouncer}`)
      continue
    }
    const d = await check(s)
    if (d) drifted.push(d)
  }
  assert.deepEqual(drifted, [])
})

test('recorded measurements (race bench) have the format race prints today: the same tables, the same columns', { skip: NEEDS.pgbench }, async () => {
  const recorded = samples.filter((x) => 'recorded' in x.options)
  assert.ok(recorded.length >= 1)
  for (const s of recorded) {
    assert.ok(s.options.check, `${s.command}: a recorded sample names its quick check`)
    const quick = await race(argv(s.options.check[0]).slice(1), { url: server.url, env: { COLUMNS: '80' }, timeoutMs: 300_000 })
    assert.equal(quick.code, 0, quick.stderr)
    assert.deepEqual(tableHeads(s.text), tableHeads(quick.stdout), `${s.command}: its tables' columns`)
    assert.ok(/█/.test(s.text) && /█/.test(quick.stdout), 'the bar chart')
  }
})
