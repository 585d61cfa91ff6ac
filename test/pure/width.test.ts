// Output that fits the screen: measuring, wrapping and cutting with colour codes, fitted tables, the timeline.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Chalk } from 'chalk'
import type { TimelineEvent } from '../../src/engine/types.js'
import { fitTable, fitWidths, sessionsTable } from '../../src/report/table.js'
import type { SessionReport } from '../../src/engine/types.js'
import { timeline, visibleEvents } from '../../src/report/timeline.js'
import { columns, hang, strip, truncate, width, wrap } from '../../src/report/width.js'
import { loadChalk, plain, styleFor } from '../../src/report/color.js'
import { isSetup } from '../../src/engine/session.js'

await loadChalk()

const red = new Chalk({ level: 1 }).red

const widest = (s: string) => Math.max(...s.split('\n').map(width))

test('width counts what the screen shows: no colour codes, wide characters twice', () => {
  assert.equal(width(red('abc')), 3)
  assert.equal(width('ab…→'), 4)
  assert.equal(width('表'), 2)
})

test('a cut keeps the colour: the red cell stays red up to its …', () => {
  const cut = truncate(red('error 40001 serialization_failure'), 14)
  assert.equal(width(cut), 14)
  assert.match(cut, /^\u001b\[31merror 40001 s…\u001b\[0m$/)
  assert.equal(truncate('short', 14), 'short')
})

test('a wrap never cuts, and every wrapped line carries its colour', () => {
  const lines = wrap(red('insert → 409 pending request exists'), 12)
  assert.ok(lines.length > 1)
  for (const l of lines) {
    assert.ok(width(l) <= 12, l)
    assert.ok(l.startsWith('\u001b[31m'), JSON.stringify(l))
  }
  assert.equal(lines.map(strip).join(' '), 'insert → 409 pending request exists')
  // A word longer than the line is broken, not cut.
  assert.deepEqual(wrap('lost-update-for-update', 10), ['lost-updat', 'e-for-upda', 'te'])
  // Spaces inside a line are kept (aligned labels), dropped where the line breaks.
  assert.deepEqual(wrap('verdict    anomaly   x', 80), ['verdict    anomaly   x'])
})

test('hang continues under the text after a label', () => {
  const lines = hang('expected   anomaly: 2 committed; or clean: 1 committed, 1 rejected: pending request exists  MATCH', 60, 11)
  assert.ok(lines.length >= 2)
  for (const l of lines) assert.ok(width(l) <= 60, l)
  assert.ok(lines.slice(1).every((l) => l.startsWith(' '.repeat(11)) && l[11] !== ' '))
})

test('columns: COLUMNS first, then the terminal, else 80', () => {
  const saved = process.env.COLUMNS
  try {
    process.env.COLUMNS = '93'
    assert.equal(columns({ isTTY: true, columns: 200 }), 93)
    delete process.env.COLUMNS
    assert.equal(columns({ isTTY: true, columns: 120 }), 120)
    assert.equal(columns({ isTTY: false, columns: 120 }), 80)
  } finally {
    if (saved === undefined) delete process.env.COLUMNS
    else process.env.COLUMNS = saved
  }
})

test('fitWidths: natural when it fits; else what gives way first narrows, widest first, never below its minimum', () => {
  assert.deepEqual(fitWidths([10, 20, 30], [], 60), [10, 20, 30])
  assert.deepEqual(fitWidths([10, 20, 30], [{ shrink: 0 }, {}, {}], 40), [10, 15, 15])
  assert.deepEqual(fitWidths([10, 20, 30], [{}, { shrink: 2 }, {}], 45), [10, 8, 27])
})

test('--theme presenter: dim text is drawn bold (a projector washes dim out); colours stay chalk\'s (issue 23)', () => {
  const saved = { NO_COLOR: process.env.NO_COLOR, FORCE_COLOR: process.env.FORCE_COLOR, TERM: process.env.TERM }
  delete process.env.NO_COLOR
  delete process.env.FORCE_COLOR
  process.env.TERM = 'xterm'
  try {
    const presenter = styleFor(true, { isTTY: true }, 'presenter')
    assert.equal(presenter.dim('pid 4711'), '\u001b[1mpid 4711\u001b[22m')
    assert.equal(presenter.red('x'), red('x'))
    assert.equal(styleFor(true, { isTTY: true }).dim('pid 4711'), '\u001b[2mpid 4711\u001b[22m')
    assert.equal(styleFor(true, { isTTY: false }, 'presenter').dim('pid 4711'), 'pid 4711', 'no colour in a pipe, whatever the theme')
  } finally {
    for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k]
    else process.env[k] = v
  }
})

test('fitWidths: every column keeps its longest word while another can still wrap at a space; words break only after', () => {
  // The second column gives way first, but not below its longest word (18) while the third can still narrow.
  assert.deepEqual(fitWidths([10, 30, 24], [{ shrink: 0 }, { min: 16 }, { shrink: 2, min: 5 }], 50, [10, 8, 18]), [10, 22, 18])
  // Nothing left to wrap at a space: then words break, down to each column's minimum.
  assert.deepEqual(fitWidths([10, 30, 24], [{ shrink: 0 }, { min: 16 }, { shrink: 2, min: 5 }], 30, [10, 8, 18]), [10, 16, 5])
})

test('sessionsTable at 80 columns: a SQLSTATE and its header stay whole, the outcome wraps at spaces instead (issue 23)', () => {
  const s = (name: string, o: Partial<SessionReport>): SessionReport => ({
    name, pid: 12525, outcome: 'committed', reason: null, sqlstate: null, condition: null, step: null, isolation: 'read committed',
    commitTag: 'COMMIT', waitedMs: 233.4, ms: 505.2, retries: 0, errors: [], ...o,
  })
  const cases: [string, SessionReport[], string[]][] = [
    // race run lock-timeout
    ['lock-timeout', [
      s('holder', { outcome: 'rejected', reason: "the holder's request fails", step: 'request' }),
      s('s1', { outcome: 'failed', step: 'lock', sqlstate: '55P03', condition: 'lock_not_available' }),
      s('retry', {}),
    ], ['55P03', 'lock_not_available']],
    // race run serializable --retries 3
    ['serializable --retries 3', [
      s('s1', { retries: 2, errors: ['40001', '40001'] }),
      s('s2', { outcome: 'rejected', reason: 'pending request exists for this user, with a long reason', step: 'check', errors: ['40001'] }),
    ], ['(40001 retried)', '(40001, 40001 retried)']],
    // race run lock-limit
    ['lock-limit', [
      s('filler', { outcome: 'rejected', reason: 'the lock table is full (53200) after many keys taken by one transaction', step: 'fill' }),
      s('probe', { outcome: 'failed', step: 'try', sqlstate: '53200', condition: 'out_of_memory' }),
    ], ['53200', 'out_of_memory']],
  ]
  for (const [name, sessions, whole] of cases) {
    const out = sessionsTable(plain, { sessions, invariant: { description: 'x', observed: 'y', held: true }, events: [] } as never, 80)
    assert.ok(out.split('\n').every((l) => width(l) <= 80), `${name}:\n${out}`)
    const cells = out.split('\n').map((l) => l.split('│').map((x) => x.trim()))
    assert.ok(cells.some((r) => r.includes('sqlstate')), `${name}: the header whole:\n${out}`)
    // Each word of the sqlstate cells is on one line of the table (a '(40001,' may end one line, '40001' start the next).
    for (const w of whole.flatMap((x) => x.split(' '))) assert.ok(out.includes(w), `${name}: ${w} whole:\n${out}`)
  }
})

test('fitTable: fits the width, rule under the header, an empty column dropped, a cut column ends in …', () => {
  const rows = [
    ['s1', 12345, 'rejected: pending limit reached and a much longer explanation of why', '', 'x'.repeat(60)],
    ['s2', 12346, 'committed', '', 'y'],
  ]
  const out = fitTable(plain, ['session', 'pid', 'outcome', 'sqlstate', 'note'], rows, [{ shrink: 0 }, { shrink: 0 }, {}, { dropIfEmpty: true }, { shrink: 2, overflow: 'cut' }], 60)
  const lines = out.split('\n')
  assert.ok(lines.every((l) => width(l) <= 60), out)
  assert.match(lines[2], /^├─+┼/, 'a rule under the header')
  assert.doesNotMatch(out, /sqlstate/)
  assert.match(out, /x+…/)
  // The wrapped outcome, read down its column, is whole.
  const col = lines.filter((l) => l.startsWith('│')).map((l) => l.split('│')[3].trim())
  assert.match(col.join(' '), /rejected: pending limit reached and a much longer explanation of why/)
})

const ev = (t: number, session: string, step: string, kind: TimelineEvent['kind'], detail?: string, setup?: boolean): TimelineEvent => ({ t, session, step, kind, detail, ...(setup ? { setup } : {}) })

const EVENTS: TimelineEvent[] = [
  ev(0.1, 's1', 'begin', 'run'),
  ev(0.2, 's1', 'begin', 'ok', 'BEGIN', true),
  ev(0.3, 's2', 'begin', 'run'),
  ev(0.4, 's2', 'begin', 'ok', 'BEGIN', true),
  ev(0.5, 's1', 'timeout', 'run'),
  ev(0.6, 's1', 'timeout', 'ok', 'set_config=2s', true),
  ev(0.7, 's1', 'lock', 'run'),
  ev(0.8, 's1', 'lock', 'ok'),
  ev(0.9, 's2', 'lock', 'run'),
  ev(1.0, 's2', 'lock', 'wait'),
  ev(5.0, 's2', 'lock', 'woke'),
  ev(5.1, 's2', 'lock', 'error', '40001 serialization_failure could not serialize access due to concurrent update'),
]

test('timeline: set-up steps hidden unless asked, with a note; what waited or failed always shown', () => {
  const shown = visibleEvents(EVENTS)
  assert.ok(!shown.some((e) => e.step === 'begin' || e.step === 'timeout'))
  assert.equal(visibleEvents(EVENTS, true).filter((e) => e.step === 'begin').length, 2)
  const text = timeline(plain, { sessions: [{ name: 's1' }, { name: 's2' }], events: EVENTS }, { width: 80 })
  assert.match(text, /3 set-up steps not shown: --timeline all shows them/)
  assert.match(text, /lock … waiting/)
  assert.doesNotMatch(text, /BEGIN/)
  assert.match(timeline(plain, { sessions: [{ name: 's1' }, { name: 's2' }], events: EVENTS }, { width: 80, all: true }), /begin → BEGIN/)
})

test('timeline: fits the width, wraps a long cell inside its column in its colour, falls back to one row per event', () => {
  const sessions = ['s1', 's2', 's3', 's4', 's5'].map((name) => ({ name }))
  const events = [...EVENTS, ev(6, 's5', 'insert', 'reject', 'pending limit reached')]
  for (const w of [80, 60, 40]) {
    const text = timeline(plain, { sessions, events }, { width: w })
    for (const l of text.split('\n')) assert.ok(width(l) <= w, `${w}: ${l}`)
    assert.match(text.replace(/\s+/g, ' '), /409 pending limit reached/)
  }
  assert.match(timeline(plain, { sessions, events }, { width: 40 }), /^ms +session/m)
  process.env.FORCE_COLOR = '1'
  try {
    const text = timeline(styleFor(true), { sessions: sessions.slice(0, 2), events }, { width: 50 })
    const errLines = text.split('\n').filter((l) => /serializ|40001|concurrent/.test(l))
    assert.ok(errLines.length >= 2, text)
    for (const l of errLines) assert.match(l, /\u001b\[31m/, `the wrapped error stays red: ${JSON.stringify(l)}`)
  } finally {
    delete process.env.FORCE_COLOR
  }
})

test('a step is set-up by what the server answered: its command tag, or a lone set_config column', () => {
  const rows = (r: Record<string, unknown>[]) => r
  assert.equal(isSetup('BEGIN', rows([])), true)
  assert.equal(isSetup('SET', rows([])), true)
  assert.equal(isSetup('SELECT', rows([{ set_config: '2s' }])), true)
  assert.equal(isSetup('SELECT', rows([{ pending: 0 }])), false)
  assert.equal(isSetup('SELECT', rows([{ set_config: '2s', pending: 0 }])), false)
  assert.equal(isSetup('COMMIT', rows([])), false)
  assert.equal(isSetup('INSERT', rows([])), false)
  assert.equal(widest(''), 0)
})
