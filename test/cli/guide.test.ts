// docs/your-own-races.md's "Writing a scenario" guide, followed as written: its shell lines run in a fresh copy of the
// project (its own scenarios/ folder, the installed node_modules), and its excerpt of scenarios/write-skew.ts
// is what that file really says.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { test } from 'node:test'
import { ROOT } from '../support/server.js'

function section(md: string, heading: string): string {
  const at = md.indexOf(`## ${heading}`)
  assert.ok(at >= 0, `docs/your-own-races.md has a section "${heading}"`)
  const next = md.indexOf('\n## ', at + 3)
  return md.slice(at, next < 0 ? undefined : next)
}

const blocks = (text: string): string[] => [...text.matchAll(/```[a-z]*\n([\s\S]*?)```/g)].map((m) => m[1])

test('Writing a scenario: the guide works as written, in a fresh copy of the project', () => {
  const guide = section(fs.readFileSync(path.join(ROOT, 'docs', 'your-own-races.md'), 'utf8'), 'Writing a scenario')
  const lines = blocks(guide)[0].split('\n').filter((l) => l.startsWith('$ ')).map((l) => l.slice(2))
  assert.ok(lines.length >= 5, lines.join('\n'))
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-guide-'))
  try {
    for (const f of ['src', 'scenarios', 'test', 'speed', 'scripts', 'bin', 'package.json', 'tsconfig.json']) fs.cpSync(path.join(ROOT, f), path.join(dir, f), { recursive: true })
    fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'))
    const env = { ...process.env, NO_COLOR: '1' }
    const outputs: string[] = []
    for (const line of lines) {
      try {
        outputs.push(execFileSync('sh', ['-c', line], { cwd: dir, env, encoding: 'utf8', timeout: 120_000, stdio: ['ignore', 'pipe', 'pipe'] }))
      } catch (e) {
        const x = e as { status: number; stdout: string; stderr: string }
        assert.fail(`$ ${line} exited ${x.status}: ${x.stdout}${x.stderr}`)
      }
    }
    const [, , , show, run, check] = outputs
    assert.match(show, /^on-call: write skew/m)
    assert.match(run, /race run on-call .*\n[\s\S]*prevented[\s\S]*MATCH/)
    assert.match(check, /all 6 behaved as documented/)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test("Writing a scenario: the excerpt of write-skew.ts is the file's own text", () => {
  const guide = section(fs.readFileSync(path.join(ROOT, 'docs', 'your-own-races.md'), 'utf8'), 'Writing a scenario')
  const excerpt = blocks(guide).find((b) => b.includes('documented:'))!
  const file = fs.readFileSync(path.join(ROOT, 'scenarios', 'write-skew.ts'), 'utf8')
  const missing = excerpt.split('\n').map((l) => l.trim()).filter((l) => l && !file.includes(l))
  assert.deepEqual(missing, [])
})
