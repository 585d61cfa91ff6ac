// A spec's `prevented by` line: the SQLSTATEs by which the server keeps its invariant (docs/verdicts.md).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseSpec, SpecError } from '../../src/specfile/parse.js'

const body = 'session s1\nstep a { select 1 }\n'

test('prevented by: codes separated by commas or spaces, 23P01 read whole although the scanner splits it', () => {
  assert.deepEqual(parseSpec(`prevented by 23505, 23P01 40001\n${body}`).prevented?.codes, ['23505', '23P01', '40001'])
  assert.deepEqual(parseSpec(`${body}prevented by 23P01\n`).prevented?.codes, ['23P01'])
  assert.equal(parseSpec(body).prevented, undefined)
})

test('prevented by: a bad line is one message with file:line:column', () => {
  for (const [text, re] of [
    [`prevented by 2350\n${body}`, /^t\.spec:1:14: '2350' is not a SQLSTATE/],
    [`prevented by 23 P01\n${body}`, /^t\.spec:1:14: '23' is not a SQLSTATE/],
    [`prevented 23505\n${body}`, /^t\.spec:1:11: expected 'by' after 'prevented'/],
    [`prevented by\n${body}`, /^t\.spec:2:1: expected a SQLSTATE after 'prevented by', e\.g\. 23505, got 'session'/],
    [`prevented by 23505\nprevented by 40001\n${body}`, /^t\.spec:2:1: a second prevented by line: the first is at line 1/],
  ] as const) {
    assert.throws(() => parseSpec(text, 't.spec'), (e: unknown) => e instanceof SpecError && re.test(e.message), text)
  }
})
