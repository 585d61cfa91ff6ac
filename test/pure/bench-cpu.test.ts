// The bench's CPU floors (speed/cpu.ts, issue 41): the machine's busy CPU read around a run, and the least time that
// CPU allows on the machine's cores, printed beside the jobs figure and the yardstick. The reading is checked against
// CPU this process really burns; the floors' arithmetic against runs whose times are given.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { busyMs, cores, withCpu } from '../../speed/cpu.js'
import { jobsFloor, type Parsed } from '../../speed/done-when.js'
import { cpuFloor } from '../../speed/yardstick.js'

/** Keeps this thread busy for `ms` of its own CPU time. */
function burn(ms: number): void {
  const until = process.cpuUsage().user / 1000 + ms
  let x = 0
  while (process.cpuUsage().user / 1000 < until) x += Math.sqrt(x + 1)
  assert.ok(x > 0)
}

test('busyMs counts the CPU this process burns (and whatever else the machine does meanwhile): at least that much', async (t) => {
  if (busyMs() === undefined) return t.skip('no /proc/stat on this machine: the bench prints no CPU floor here')
  const { cpuMs } = await withCpu(async () => burn(300))
  assert.ok(cpuMs !== undefined && cpuMs >= 250, `300 ms burned, ${cpuMs} ms read`)
  assert.ok(cores() >= 1)
})

const run = (seconds: number): Parsed => ({ complete: true, verdict: 'violated', search: 'reduced', ran: '', runs: 66, orders: '', groups: [], shortest: 2, code: 1, seconds })

test('jobsFloor: the cores --jobs 1 kept busy and the least time --jobs 2 could take on n cores, as medians of the rounds', () => {
  // 2.6 CPU-s in 2.0 s is 1.3 cores; 3.2 CPU-s on 2 cores is 1.6 s at best, 0.8 of --jobs 1's 2.0 s.
  const pairs = [
    { one: run(2.0), two: run(2.1), cpu: { one: 2600, two: 3200 } },
    { one: run(2.0), two: run(2.0), cpu: { one: 2600, two: 3200 } },
    { one: run(1.0), two: run(1.0), cpu: { one: 5000, two: 9000 } },
  ]
  assert.equal(
    jobsFloor(pairs, 2),
    '; CPU: --jobs 1 kept 1.30 cores busy (2.60 CPU-s), --jobs 2 used 3.20 CPU-s: on 2 cores at least 0.80x --jobs 1\'s time',
  )
  assert.equal(jobsFloor([{ one: run(2), two: run(2) }], 2), '', 'no CPU read: nothing said')
})

test("cpuFloor: race's CPU an order over the cores, against isolationtester's time a permutation", () => {
  // 12 CPU-ms an order on 2 cores is 6 ms at best: 1.5x isolationtester's 4 ms.
  const line = cpuFloor({ tester: [4, 4, 5], testerCpu: [4, 4, 4], raceCpu: [12, 11, 13] }, 2)
  assert.match(line!, /isolationtester 0\.0040 CPU-s a permutation, race 0\.0120 CPU-s an order \(3\.00x\); on 2 cores an order takes at least 0\.0060 s, 1\.50x isolationtester's permutation$/)
  assert.equal(cpuFloor({ tester: [4], testerCpu: [], raceCpu: [] }, 2), undefined)
})
