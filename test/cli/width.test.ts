// The room and the CI log: at COLUMNS=80 every command of the issue prints no line wider than 80 and keeps what
// differs between sessions; colours survive a wrap; the timeline hides set-up steps unless asked.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { race } from '../support/server.js'
import { useOutside } from '../support/faults.js'

const ctx = useOutside()

const widest = (s: string) => Math.max(...s.split('\n').map((l) => [...l].length))

/** Runs race at COLUMNS=80; `codes`: the exit codes that still print the whole report (what is tested is its width). */
async function at80(args: string[], url?: string, codes = [0]) {
  const r = await race(args, { url, env: { COLUMNS: '80' }, timeoutMs: 180_000 })
  assert.ok(codes.includes(r.code ?? -1), `race ${args.join(' ')} exited ${r.code}: ${r.stderr}`)
  assert.ok(widest(r.stdout) <= 80, `race ${args.join(' ')}: a line of ${widest(r.stdout)} columns:\n${r.stdout.split('\n').filter((l) => [...l].length > 80).join('\n')}`)
  return r.stdout
}

test('COLUMNS=80: list, show write-skew and show advisory fit, and keep every step of SQL whole', async () => {
  const list = await at80(['list'])
  assert.match(list, /^├/m, 'a rule under the header, even without colour')
  for (const id of ['broken', 'advisory', 'write-skew', 'lost-update-for-update', 'pool-isolation-leak']) assert.match(list, new RegExp(`│ ${id} `))
  const ws = await at80(['show', 'write-skew'])
  // What makes it write skew: the two doctors update different rows.
  assert.match(ws, /step off +\{ update doctors set on_call = false where id = 1 \}/)
  assert.match(ws, /step off +\{ update doctors set on_call = false where id = 2 \}/)
  assert.match(ws, /t1 +off +update doctors set on_call = false where id = 1$/m)
  assert.match(ws, /t2 +off +update doctors set on_call = false where id = 2$/m)
  const adv = await at80(['show', 'advisory'])
  // Long SQL wraps under itself; read back without the line breaks it is the step's SQL.
  const flat = adv.replace(/\n {19}/g, ' ')
  assert.match(flat, /step check +\{ select count\(\*\)::int as pending from setup_requests where user_id = :user and status = 'pending' \}/)
  assert.match(flat, /step lock +\{ select pg_advisory_xact_lock\(:key\) \}/)
})

test('COLUMNS=80: run advisory --n 5, run broken --timeline, check and matrix fit', async () => {
  const adv = await at80(['run', 'advisory', '--n', '5', '--max-pending', '3'], ctx.server.url)
  assert.equal((adv.match(/│ committed /g) ?? []).length, 3, adv)
  assert.equal((adv.match(/│ rejected: pending limit reached /g) ?? []).length, 2, adv)
  assert.doesNotMatch(adv, /sqlstate/, 'no SQLSTATE column when no session failed')
  const broken = await at80(['run', 'broken', '--timeline', '--schedule', 'lockstep'], ctx.server.url)
  assert.match(broken, /^ms +s1 +s2$/m)
  assert.match(broken, /insert → INSERT 1/)
  assert.doesNotMatch(broken, /→ BEGIN/, 'set-up steps are hidden by default')
  assert.match(broken, /set-up steps? not shown: --timeline all shows them/)
  const all = await at80(['run', 'broken', '--timeline', 'all', '--schedule', 'lockstep'], ctx.server.url)
  assert.match(all, /begin → BEGIN/)
  // A deviation (row-deadlock's victim depends on whose deadlock_timeout runs out first) still prints the report.
  const check = await at80(['check'], ctx.server.url, [0, 1])
  assert.match(check, /(all \d+ behaved|\d+ of \d+ did not behave) as documented/)
  const matrix = await at80(['matrix'], ctx.server.url, [0, 1])
  assert.match(matrix, /(all \d+ cells as documented|cells deviate)/)
})

test('a wrapped red cell stays red on every line; a narrow terminal gets one row per event', async () => {
  const r = await race(['run', 'deadlock', '--timeline'], { url: ctx.server.url, env: { COLUMNS: '60', FORCE_COLOR: '1', NO_COLOR: '' } })
  assert.equal(r.code, 0, r.stderr)
  // The timeline's rows: from its header rule to the first empty line.
  const all = r.stdout.split('\n')
  const from = all.findIndex((l) => /^(\u001b\[[0-9;]*m)*─+/.test(l))
  const rows = all.slice(from + 1, all.indexOf('', from))
  const lines = rows.filter((l) => /40P01|deadlock_detected/.test(l))
  assert.ok(lines.length >= 1, r.stdout)
  for (const l of lines) assert.match(l, /\u001b\[31m/, `red: ${JSON.stringify(l)}`)
  const narrow = await race(['run', 'advisory', '--n', '6', '--timeline'], { url: ctx.server.url, env: { COLUMNS: '70' } })
  assert.equal(narrow.code, 0, narrow.stderr)
  assert.match(narrow.stdout, /^ms +session$/m)
  assert.ok(widest(narrow.stdout) <= 70, narrow.stdout)
})

test('help fits 80 columns too, and race --version prints the version', async () => {
  for (const args of [['--help'], ['run', '--help'], ['check', '--help'], ['bench', '--help'], ['locks', '--help'], ['matrix', '--help']]) {
    const r = await race(args, { env: { COLUMNS: '80' } })
    assert.equal(r.code, 0)
    assert.ok(widest(r.stdout) <= 80, `${args.join(' ')}: ${widest(r.stdout)}`)
  }
  const v = await race(['--version'])
  assert.match(v.stdout, /^\d+\.\d+\.\d+\n$/)
})

test('--isolation takes the short names bench takes (rr), in run and show', async () => {
  const r = await race(['show', 'write-skew', '--isolation', 'rr'])
  assert.equal(r.code, 0, r.stderr)
  assert.match(r.stdout, /begin isolation level repeatable read/)
  const bad = await race(['show', 'write-skew', '--isolation', 'xx'])
  assert.equal(bad.code, 2)
  assert.match(bad.stderr, /\(or rc, rr, ser\)/)
})
