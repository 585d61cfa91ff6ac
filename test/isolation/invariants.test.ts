// What a spec's invariant and steps may be, through the real CLI on the test server: only a SQL boolean decides
// an invariant (a json or jsonb `true`, which the driver hands over as a JavaScript true, is undecided, never
// held); an invariant may end in a `-- comment` or a `;` and a comment; an array slice `arr[1:n]` in a step or
// an invariant is SQL (as isolationtester runs it), not a bind `:n`.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import postgres, { type Sql } from 'postgres'
import { race, schemasOf, useServer, type TestServer } from '../support/server.js'

let server: TestServer
let admin: Sql
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-invariants-'))

before(async () => {
  server = await useServer()
  admin = postgres(server.url, { max: 1, onnotice: () => {} })
})
after(async () => {
  await admin.end()
  await server.stop()
  fs.rmSync(dir, { recursive: true, force: true })
})

function file(name: string, text: string): string {
  const f = path.join(dir, name)
  fs.writeFileSync(f, text)
  return f
}

const TWO_ORDERS = `setup { create table orders (id int); }
session s1
step a { insert into orders values (1); }
session s2
step b { insert into orders values (2); }
`

interface Doc {
  invariant: { held: boolean | null; observed: string; error?: string }
  verdict: string
}

for (const [kind, expr] of [
  ['jsonb', `select to_jsonb(count(*) <= 1) from orders`],
  ['json', `select to_json(count(*) <= 1) from orders`],
  ['jsonb true', `select 'true'::jsonb`],
] as const) {
  test(`an invariant returning ${kind} is undecided (exit 3, naming the type), never held, even when it says true`, async () => {
    // Two orders: a count(*) <= 1 invariant is violated; as json it says false; the constant says true.
    const f = file(`${kind.replace(' ', '-')}.spec`, `${TWO_ORDERS}invariant "at most one order" { ${expr} }\nexpect held\n`)
    const r = await race(['run', f, '--json'], { url: server.url })
    assert.equal(r.code, 3, r.stdout + r.stderr)
    const doc = JSON.parse(r.stdout) as Doc
    assert.equal(doc.invariant.held, null)
    assert.equal(doc.verdict, 'unknown')
    assert.match(doc.invariant.error ?? '', new RegExp(`held column is not a boolean \\(${kind.startsWith('jsonb') ? 'jsonb' : 'json'}\\)`))
    assert.match(r.stderr, /^race: could not decide: .*not a boolean/)
    assert.deepEqual(await schemasOf(admin, r.pid), [])
  })
}

test('a boolean invariant still decides: held and violated (the type check does not make every invariant unknown)', async () => {
  const held = await race(['run', file('bool-held.spec', `${TWO_ORDERS}invariant "at most two" { select count(*) <= 2 from orders }\nexpect held\n`)], { url: server.url })
  assert.equal(held.code, 0, held.stdout + held.stderr)
  assert.match(held.stdout, /HELD/)
  const violated = await race(['run', file('bool-violated.spec', `${TWO_ORDERS}invariant "at most one" { select count(*) <= 1 from orders }\nexpect violated\n`)], { url: server.url })
  assert.equal(violated.code, 0, violated.stdout + violated.stderr)
  assert.match(violated.stdout, /VIOLATED/)
})

test('invariants ending in a -- comment, or in ; and a comment, run (race wraps them as subqueries)', async () => {
  const f = file(
    'comments.spec',
    `${TWO_ORDERS}invariant "at most two" { select count(*) <= 2 from orders -- two sessions, two orders
}
invariant "none negative" { select count(*) = 0 from orders where id < 0; -- ids start at 1
}
invariant "a block comment too" { select true /* the end */ }
expect held
`,
  )
  const r = await race(['run', f], { url: server.url })
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.match(r.stdout, /observed all 3 true\s+HELD/)
  assert.match(r.stdout, /MATCH/)
})

test('an array slice arr[1:n] (also arr[:n], arr[n:]) in a step and an invariant is SQL, not a bind', async () => {
  const f = file(
    'slices.spec',
    `setup { create table t (arr int[], n int); insert into t values (array[1,2,3], 2); create table seen (a int[], b int[], c int[]); }
session s1
step a { insert into seen select arr[1:n], arr[:n], arr[n:] from t; }
invariant "the slices as SQL takes them" { select a = array[1,2] and b = array[1,2] and c = array[2,3] from seen, t where array_length(t.arr[1:n], 1) = 2 }
expect held
`,
  )
  const r = await race(['run', f], { url: server.url })
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.match(r.stdout, /HELD/)
  assert.match(r.stdout, /MATCH/)
})
