// What race writes to a pipe arrives whole: Node writes to a pipe asynchronously, and a process.exit() right after a
// large write (a --json document of a few hundred kB) ended the process with the rest still queued. A reader that
// is slower than race got a document cut short (it was cut at 219,264 bytes in
// test/app/app-explore once). Here the reader begins to read only once race has written its document.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import { GROW_RACE } from '../support/explore.js'
import { BIN, useServer, type TestServer } from '../support/server.js'

let server: TestServer
let dir: string
before(async () => {
  server = await useServer()
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-pipe-'))
})
after(async () => {
  fs.rmSync(dir, { recursive: true, force: true })
  await server?.stop()
})

/** race with its stdout read through a pipe, from `lateMs` after its first bytes were there (a reader busy elsewhere). */
function readLate(args: string[], lateMs: number): Promise<{ code: number | null; stdout: Buffer; stderr: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', DATABASE_URL: server.url }
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    const chunks: Buffer[] = []
    let stderr = ''
    child.stdout.once('readable', () =>
      setTimeout(() => {
        child.stdout.on('data', (d: Buffer) => chunks.push(d))
        child.stdout.resume()
      }, lateMs),
    )
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), 300_000)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout: Buffer.concat(chunks), stderr })
    })
  })
}

test('a --json document of a few hundred kB, read late through a pipe, arrives whole', async () => {
  // 470 interleavings of an application race whose tree grows past its first run (GROW_RACE).
  const file = path.join(dir, 'grow.race.mjs')
  fs.writeFileSync(file, GROW_RACE)
  // The reader starts 2 s after the document began to arrive: race, done by then, must wait for it (at most 10 s).
  const r = await readLate(['explore', file, '--exhaustive', '--json'], 2000)
  assert.equal(r.code, 0, r.stderr)
  assert.ok(r.stdout.length > 200_000, `${r.stdout.length} bytes: more than a pipe holds`)
  const j = JSON.parse(r.stdout.toString('utf8')) as { interleavings: number; every: unknown[] }
  assert.equal(j.interleavings, 470)
  assert.equal(j.every.length, 470)
})
