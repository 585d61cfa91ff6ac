// The documents stand alone and tell the truth: README.md (the front door), CONTRIBUTING.md and every markdown
// file under docs/. No paths outside the package, the articles by their English titles, `./bin/race` (or `npx race`
// in a project) in their commands, every relative link leads to a file (and heading) that exists, the README fits
// in a head, and every sample is what race prints today (re-run and compared, after normalising what
// legitimately varies: pids, timings, versions, ports, random names). Race output pasted without a sample marker
// is refused: it would go stale unseen.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { test } from 'node:test'
import { ARTICLES } from '../../src/registry.js'
import { ROOT, allSamples, argv, documents, drift, normalize, readDoc, readme, render, tableHeads, type Sample } from '../../scripts/samples.js'
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
const docs = documents()
const samples = allSamples()

/** GitHub's anchor for a heading. */
const slug = (h: string) => h.trim().toLowerCase().replace(/[^\w\- ]/gu, '').replace(/ /g, '-')

/** A document with its fenced blocks blanked out (same length), so that headings and links in code do not count. */
const prose = (text: string) => text.replace(/^(`{3,})[^\n]*\n[\s\S]*?^\1$/gm, (m) => m.replace(/[^\n]/g, ' '))

test('the README stands alone: no ../shared, no design notes, no untranslated text; commands through ./bin/race or npx', () => {
  const flat = md.replace(/\s+/g, ' ')
  // The articles by their English titles (as the registry names them), and sections by number or heading.
  for (const title of Object.values(ARTICLES)) assert.ok(flat.includes(title), title)
  const commands = [...md.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((m) => m[1].split('\n'))
  assert.ok(commands.length > 10)
  // The set-up's first race is this checkout's: never npx in the checkout (npm copies and rebuilds it first), never
  // a registry package (the registry's race is someone else's).
  const setup = md.slice(md.indexOf('## Set-up'), md.indexOf('## Add race to your project'))
  assert.match(setup, /```sh\nnpm install\n\.\/bin\/race run advisory --n 5 --max-pending 3\n```/)
  assert.match(md, /## Add race to your project[\s\S]*\brun\(/, 'the README shows run()')
})

test('the README is the front door: under 300 lines, the commands in one table, where to go next', () => {
  const lines = md.split('\n').length
  assert.ok(lines < 300, `README.md is ${lines} lines`)
  const heads = [...prose(md).matchAll(/^## (.*)$/gm)].map((m) => m[1])
  assert.deepEqual(heads, ['Set-up', 'Add race to your project', 'Commands', 'Where to go next'])
  const help = execHelp()
  const table = md.slice(md.indexOf('## Commands'), md.indexOf('## Where to go next'))
  for (const cmd of help) assert.match(table, new RegExp(`\\| \`\\./bin/race ${cmd}\\b`), `the commands table has race ${cmd}`)
  // Every document under docs/ is reachable from the front door.
  const next = md.slice(md.indexOf('## Where to go next'))
  for (const d of docs.filter((x) => x.startsWith('docs/') && !x.startsWith('docs/dev/'))) assert.ok(next.includes(`](${d})`), `Where to go next links ${d}`)
  assert.ok(next.includes('](CONTRIBUTING.md)'))
})

/** The commands race --help lists (read without starting a server). */
function execHelp(): string[] {
  const out = execFileSync(process.execPath, [path.join(ROOT, 'bin', 'race'), '--help'], { encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } })
  const at = out.indexOf('Commands:')
  assert.ok(at >= 0, out)
  return [...out.slice(at).matchAll(/^ {2}([a-z]+)\b/gm)].map((m) => m[1]).filter((c) => c !== 'help')
}

test('every document stands alone: no ../shared or design notes, English only, commands through ./bin/race or npx', () => {
  for (const d of docs) {
    const text = readDoc(d)
    assert.doesNotMatch(text, /\.\.\/shared|seeds\/|DESIGN\.md/, d)
    assert.doesNotMatch(text, /[\u3040-\u30ff\u3400-\u9fff\uff00-\uffef]/, `${d}: every citation in English`)
    const commands = [...text.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((m) => m[1].split('\n'))
    const bare = commands.filter((l) => /^(\$ )?race\b/.test(l.trim()))
    assert.deepEqual(bare, [], `${d}: a command line starts with ./bin/race, or npx race in a project (race is not on PATH after npm install)`)
    assert.deepEqual(commands.filter((l) => /\bnpm (install|i|exec)\b.*\srace(\s|$)|\bnpx race@/.test(l)), [], `${d}: no command installs the registry package named race`)
  }
  // The benchmark cites the isolation-levels article's figures by section.
  assert.match(readDoc('docs/bench.md').replace(/\s+/g, ' '), /section "Performance impact", "Benchmark ratios"/)
})

test('every relative link in every document leads to a file that exists, and to a heading it has', () => {
  const broken: string[] = []
  for (const d of docs) {
    for (const m of prose(readDoc(d)).matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1]
      if (/^[a-z]+:/.test(target)) continue
      const [file, anchor] = target.split('#')
      const abs = file ? path.resolve(ROOT, path.dirname(d), file) : path.join(ROOT, d)
      if (!fs.existsSync(abs)) {
        broken.push(`${d}: ${target} (no such file)`)
        continue
      }
      if (anchor && abs.endsWith('.md')) {
        const heads = [...prose(fs.readFileSync(abs, 'utf8')).matchAll(/^#{1,6} (.*)$/gm)].map((h) => slug(h[1]))
        if (!heads.includes(anchor)) broken.push(`${d}: ${target} (no such heading)`)
      }
    }
  }
  assert.deepEqual(broken, [])
})

test("race's output appears only as samples: no pasted race command lines or tables outside a sample marker", () => {
  const pasted: string[] = []
  for (const d of docs) {
    const text = readDoc(d).replace(/````[\s\S]*?````/g, '')
    for (const m of text.matchAll(/^(`{3})([a-z]*)\n([\s\S]*?)^```$/gm)) {
      const before = text.slice(0, m.index).trimEnd().split('\n').pop() ?? ''
      if (/^<!-- (sample|speed): /.test(before)) continue
      const body = m[3]
      if (m[2] !== 'sh' && /^\$ (\.\/bin\/race|npx race|race)\b/m.test(body)) pasted.push(`${d}: ${body.split('\n')[0]}`)
      else if (/^[┌│└]/m.test(body)) pasted.push(`${d}: a table: ${body.split('\n')[0]}`)
    }
  }
  assert.deepEqual(pasted, [], 'write a sample marker above each (scripts/samples.ts), then npm run readme')
})

test('every sample marker has its output written under it, and names a command race has', async () => {
  assert.ok(samples.length >= 12, `${samples.length} samples`)
  const empty = samples.filter((s) => !s.text.trim()).map((s) => s.command)
  assert.deepEqual(empty, [], 'run npm run readme to fill them')
  // A prompt line is not compared with race's output (it is not race's): it must name the sample's own command.
  const prompts = samples.filter((s) => 'prompt' in s.options && !s.text.startsWith(`$ ${s.options.prompt[0] === 'npx' ? 'npx ' : './bin/'}${s.command.replace(/\$URL/, "'postgres://...'")}\n`))
  assert.deepEqual(prompts.map((s) => `${s.doc}: ${s.text.split('\n')[0]}`), [], 'npm run readme writes the prompt line')
  const help = await race(['--help'])
  for (const s of samples) {
    const cmd = argv(s.command)[1]
    assert.ok(help.stdout.includes(`  ${cmd} `), `${s.command}: race has no command ${cmd}`)
  }
})

/** Whether a TCP server answers at host:port (a MySQL/MariaDB sample needs the server its command names). */
function reachable(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect({ host, port, timeout: 2000 })
    const done = (ok: boolean) => {
      sock.destroy()
      resolve(ok)
    }
    sock.on('connect', () => done(true)).on('error', () => done(false)).on('timeout', () => done(false))
  })
}

/** Re-runs a sample as the README says; a race (unordered) may take a documented alternative: 3 tries. */
async function check(s: Sample): Promise<string> {
  let d = ''
  const o = { unordered: 'unordered' in s.options, anySession: 'any-session' in s.options }
  const tries = Number(s.options.tries?.[0] ?? (o.unordered || o.anySession ? 3 : 1))
  for (let i = 0; i < tries; i++) {
    try {
      d = drift(s.text, await render(s), o)
    } catch (e) {
      // A command that no longer runs as the sample says (another exit code): reported with the rest.
      d = (e as Error).message
    }
    if (!d) return ''
  }
  return `${s.doc}: ${s.command}: ${d}`
}

test('samples: the runs a search on several jobs made ahead are a placeholder (which job ends first decides them), the runs taken are not', () => {
  const line = (tail: string) => `6 runs in 0.3 s: 18.5 interleavings per second (reduced search, on 2 jobs: ${tail})`
  assert.deepEqual(normalize(line('7 runs made, 1 of them ahead of the one-job search and not needed')), normalize(line('6 runs made, none wasted')))
  assert.notDeepEqual(normalize(line('6 runs made, none wasted')), normalize(line('6 runs made, none wasted').replace(/^6 runs in/, '5 runs in')))
})

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
    const mysql = /mysql:\/\/[^@\s]*@([^:/\s]+):(\d+)/.exec(s.command)
    if (mysql && !(await reachable(mysql[1], Number(mysql[2])))) {
      t.diagnostic(`skipped ${s.command}: no MySQL/MariaDB at ${mysql[1]}:${mysql[2]}`)
      continue
    }
    const d = await check(s)
    if (d) drifted.push(d)
  }
  assert.deepEqual(drifted, [])
})

test('recorded measurements (race bench) have the format race prints today: the same tables, the same columns', { skip: NEEDS.pgbench }, async (t) => {
  const recorded = samples.filter((x) => 'recorded' in x.options)
  assert.ok(recorded.length >= 1)
  for (const s of recorded) {
    assert.ok(s.options.check, `${s.command}: a recorded sample names its quick check`)
    const mysql = /mysql:\/\/[^@\s]*@([^:/\s]+):(\d+)/.exec(s.options.check[0])
    if (mysql && !(await reachable(mysql[1], Number(mysql[2])))) {
      t.diagnostic(`skipped ${s.command}: no MySQL/MariaDB at ${mysql[1]}:${mysql[2]}`)
      continue
    }
    const quick = await race(argv(s.options.check[0]).slice(1), { url: server.url, env: { COLUMNS: s.options.columns?.[0] ?? '80' }, timeoutMs: 300_000 })
    assert.equal(quick.code, 0, quick.stderr)
    assert.deepEqual(tableHeads(s.text), tableHeads(quick.stdout), `${s.doc}: ${s.command}: its tables' columns`)
    assert.equal(/█/.test(s.text), /█/.test(quick.stdout), `${s.doc}: ${s.command}: the bar chart, as race draws it or not`)
  }
  assert.ok(recorded.some((s) => /█/.test(s.text)), 'a recorded sample shows the bar chart')
})
