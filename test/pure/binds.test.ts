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

test('a colon inside a subscript is an array slice, not a bind; an ARRAY[...] constructor holds values, which may be binds', async () => {
  const sql = 'select arr[1:n], arr[:n], arr[n:], arr[lo : hi], m[1:2][:k], array[:a, :b], array[x[1:n], :c], t[1]::int[], :d from t'
  const p = parseBinds(sql)
  assert.deepEqual(p.names, ['a', 'b', 'c', 'd'])
  assert.equal(p.text, 'select arr[1:n], arr[:n], arr[n:], arr[lo : hi], m[1:2][:k], array[$1, $2], array[x[1:n], $3], t[1]::int[], $4 from t')
  // Brackets inside strings and comments do not count.
  assert.deepEqual(parseBinds("select '[', :x -- ]\n, :y").names, ['x', 'y'])
  assert.deepEqual(parseBinds('select a[1:n] from t where id = ?', 'question').names, [])
})

test('withoutFinalSemicolon: the final ; goes with the blanks and comments after it; a comment without one stays', async () => {
  const { withoutFinalSemicolon } = await import('../../src/binds.js')
  assert.equal(withoutFinalSemicolon('select 1;'), 'select 1')
  assert.equal(withoutFinalSemicolon('  select 1 ;  -- done\n /* and */ \n'), 'select 1')
  assert.equal(withoutFinalSemicolon('select 1 -- no semicolon'), 'select 1 -- no semicolon')
  assert.equal(withoutFinalSemicolon("select ';' -- x"), "select ';' -- x")
  assert.equal(withoutFinalSemicolon('select $$;$$'), 'select $$;$$')
  assert.equal(withoutFinalSemicolon("select 'a;'"), "select 'a;'")
})

test('a text parsed again (kept from its first parse) gives the same answer, whatever a caller did to the first, and each placeholder style its own', () => {
  const sql = 'update a set b = :x where c = :y and d = :x'
  const first = parseBinds(sql)
  assert.deepEqual(first, { text: 'update a set b = $1 where c = $2 and d = $1', names: ['x', 'y'] })
  first.names.push('changed by a caller')
  first.names.reverse()
  assert.deepEqual(parseBinds(sql), { text: 'update a set b = $1 where c = $2 and d = $1', names: ['x', 'y'] })
  // The same text for MySQL: one ? per use, not the PostgreSQL answer kept above.
  assert.deepEqual(parseBinds(sql, 'question'), { text: 'update a set b = ? where c = ? and d = ?', names: ['x', 'y', 'x'] })
  assert.deepEqual(parseBinds(sql), { text: 'update a set b = $1 where c = $2 and d = $1', names: ['x', 'y'] })
})
