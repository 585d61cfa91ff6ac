// Input parsing: durations, whole numbers, URLs (masked), names; advisory keys.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { UsageError } from '../../src/errors.js'
import { checkUrl, maskUrl, resolveTarget } from '../../src/db/target.js'
import { parseDuration, parseWhole, closest } from '../../src/parse.js'
import { advisoryKey } from '../../src/scenario.js'

test('durations: ms, s, m, bare milliseconds; nonsense is a UsageError', () => {
  assert.equal(parseDuration('--window', '300ms'), 300)
  assert.equal(parseDuration('--window', '2s'), 2000)
  assert.equal(parseDuration('--window', '1.5s'), 1500)
  assert.equal(parseDuration('--window', '1m'), 60000)
  assert.equal(parseDuration('--window', '250'), 250)
  for (const bad of ['', 'abc', '1y', '-5s', '9999999999ms', '0s', '5 s s']) {
    assert.throws(() => parseDuration('--window', bad), UsageError, bad)
  }
})

test('whole numbers: bounds and non-numbers', () => {
  assert.equal(parseWhole('--n', '5', 1), 5)
  for (const bad of ['0', '-1', '1.5', 'abc', '', '1e3']) assert.throws(() => parseWhole('--n', bad, 1), UsageError, bad)
})

test('URLs: passwords are masked; wrong schemes and ports are refused', () => {
  assert.equal(maskUrl('postgres://u:secret@h:5432/db'), 'postgres://u:***@h:5432/db')
  assert.equal(maskUrl('postgres://u@h/db'), 'postgres://u@h/db')
  assert.equal(checkUrl('postgresql://u:p@h/db', 'x'), 'postgresql://u:p@h/db')
  for (const bad of ['redis://u:secret@h/db', 'postgres://h:99999/db', 'postgres://h:abc/db', 'mysql://u:secret@h:99999/db', 'mysql://u:secret@/db', 'not a url', '']) {
    assert.throws(() => checkUrl(bad, '--database-url'), (e: Error) => e instanceof UsageError && !e.message.includes('secret'), bad)
  }
  // mysql:// and mariadb:// name a MySQL/MariaDB server; the password is masked the same way.
  for (const url of ['mysql://u:secret@h:3306/db', 'mariadb://u:secret@h/db']) {
    const t = resolveTarget(url, {})
    assert.equal(t.engine, 'mysql')
    assert.ok(!t.label.includes('secret') && t.label.includes('***'), t.label)
  }
  assert.equal(resolveTarget('postgres://u@h/db', {}).engine, undefined)
  assert.equal(resolveTarget(undefined, {}).kind, 'embedded')
  assert.equal(resolveTarget(undefined, { DATABASE_URL: 'postgres://a:b@h/d' }).label, 'postgres://a:***@h/d')
  assert.equal(resolveTarget(undefined, { PGHOST: 'h', PGPASSWORD: 'zzz' }).kind, 'env')
})

test('closest id for typos', () => {
  assert.equal(closest('advisroy', ['broken', 'advisory', 'for-update']), 'advisory')
  assert.equal(closest('zzzzzzzz', ['broken', 'advisory']), undefined)
})

test('advisory keys (§8.1): sha256 first 8 bytes, big-endian, signed', () => {
  // Computed outside the project: python3 -c "import hashlib;print(int.from_bytes(hashlib.sha256(b'setup_request:42').digest()[:8],'big',signed=True))"
  assert.equal(advisoryKey('setup_request', '42'), 7844923485908670055n)
  assert.equal(advisoryKey('setup_request', '00000000-0000-0000-0000-000000000001'), -343606002347486043n)
  assert.equal(advisoryKey('withdrawal', '7'), -6843500570515096461n)
  assert.notEqual(advisoryKey('setup_request', 'x'), advisoryKey('withdrawal', 'x'))
})
