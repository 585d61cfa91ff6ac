// Named binds: the SQL shown is the SQL run, with only the bind markers turned into $1, $2, ...
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseBinds } from '../../src/binds.js'

test('named binds become positional parameters; the same name is the same parameter', () => {
  assert.deepEqual(parseBinds("insert into t (u, s) values (:user, 'pending') returning :user"), {
    text: "insert into t (u, s) values ($1, 'pending') returning $1",
    names: ['user'],
  })
  assert.deepEqual(parseBinds('update a set b = :read.balance + 50 where v = :read.version'), {
    text: 'update a set b = $1 + 50 where v = $2',
    names: ['read.balance', 'read.version'],
  })
})

test('casts, strings, quoted identifiers, comments and dollar quotes are left alone', () => {
  const sql = `select :n::int, ':not', E'\\':no', "a:b", x::text -- :comment
/* :block /* :nested */ */ $$ :body $$, $tag$ :tagged $tag$, $1, :last`
  const p = parseBinds(sql)
  assert.deepEqual(p.names, ['n', 'last'])
  assert.equal(p.text, sql.replace(':n::int', '$1::int').replace(':last', '$2'))
})

test('no binds: the text is unchanged', () => {
  const sql = "select count(*)::int as pending from setup_requests where status = 'pending'"
  assert.deepEqual(parseBinds(sql), { text: sql, names: [] })
})
