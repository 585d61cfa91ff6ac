// The spec format (each construct, each bad input with file:line:column), isolationtester's output rules
// (PQprint, libpq's message text, the error cursor), the permutation order, templates, and how a spec becomes a
// scenario. No server.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { stepWait } from '../../src/tester/suite.js'
import { UsageError } from '../../src/errors.js'
import { checkScenario, plan } from '../../src/plan.js'
import { diffLines } from '../../src/tester/diff.js'
import { libpqEnv, maintenanceOnly, maintenanceTargets, outsideReach, transactionControl, unterminated } from '../../src/specfile/files.js'
import { statements } from '../../src/lex.js'
import { errorPosition, formatMessage, printResult } from '../../src/tester/format.js'
import { diff, guardedSql, shownBlock } from '../../src/specfile/guard.js'
import { expandTemplates, parseSpec, SpecError } from '../../src/specfile/parse.js'
import { qualifyPermutation } from '../../src/specfile/common.js'
import { idFromFile, specToScenario } from '../../src/specfile/scenario.js'
import { allPermutations, countPermutations } from '../../src/tester/tester.js'

const bad = (text: string, where: string, what: RegExp) => {
  assert.throws(
    () => parseSpec(text, 'x.spec'),
    (e: unknown) => {
      assert.ok(e instanceof SpecError, String(e))
      assert.ok(e instanceof UsageError, 'a bad spec is bad input (exit 2)')
      assert.equal(`${e.line}:${e.column}`, where, e.message)
      assert.match(e.message, new RegExp(`^x\\.spec:${where.replace(':', ':')}: `))
      assert.match(e.message, what)
      assert.ok(!e.message.includes('\n'), 'one line')
      return true
    },
  )
}

describe('spec grammar', () => {
  test('setup blocks, teardown, sessions with setup/steps/teardown, permutations', () => {
    const s = parseSpec(
      `# comment
setup { create table t (id int); }
setup
{
  insert into t values (1);
}
teardown { drop table t; }
session "s 1"
setup { begin; }
step a { select 1; }
step b	{ select 2; }
teardown { commit; }
session s2
step c { select 3; }
permutation a c b
permutation "a" b c
`,
      'x.spec',
    )
    assert.deepEqual(
      s.setup.map((x) => x.sql),
      ['create table t (id int);', '\n  insert into t values (1);\n'],
      'leading spaces and tabs trimmed, newlines kept, block ends at the first }',
    )
    assert.equal(s.teardown?.sql, 'drop table t;')
    assert.deepEqual(
      s.sessions.map((x) => [x.name, x.setup, x.steps.map((st) => st.name), x.teardown]),
      [
        ['s 1', 'begin;', ['a', 'b'], 'commit;'],
        ['s2', undefined, ['c'], undefined],
      ],
    )
    assert.deepEqual(
      s.permutations.map((p) => p.steps.map((x) => x.name)),
      [
        ['a', 'c', 'b'],
        ['a', 'b', 'c'],
      ],
    )
    assert.deepEqual(s.unused, [])
    assert.deepEqual(s.sessions[0].steps[0].pos, { line: 10, column: 6 })
  })

  test('step markers: (*), (other step), (other notices N), several at once', () => {
    const s = parseSpec(
      `session s1
step a { select 1; }
session s2
step b { select 2; }
step c { select 3; }
permutation a b(*) c(a, a notices 2, *)
`,
    )
    assert.deepEqual(s.permutations[0].steps[1].blockers, [{ kind: 'once' }])
    assert.deepEqual(
      s.permutations[0].steps[2].blockers.map((b) => (b.kind === 'once' ? '*' : b.kind === 'step' ? b.step : `${b.step}:${b.count}`)),
      ['a', 'a:2', '*'],
    )
  })

  test("race's lines: invariant, expect and a template session, where setup/teardown/permutation may stand", () => {
    const s = parseSpec(`
invariant "first" { select true }
setup { create table t (id int) }
expect held
session s*
step b { begin }
step c { commit }
invariant "second" { select count(*) = 0 from t }
session admin
step look { select 1 }
permutation look
`)
    assert.deepEqual(
      s.invariants.map((i) => [i.description, i.sql]),
      [
        ['first', 'select true'],
        ['second', 'select count(*) = 0 from t'],
      ],
    )
    assert.equal(s.expect?.value, 'held')
    assert.equal(s.sessions[0].template, true)
    assert.equal(s.sessions[1].template, false)
    assert.deepEqual(s.unused, ['b', 'c'], 'steps no permutation names are reported, as isolationtester does')
  })

  test('templates: --n makes s1..sN with their steps', () => {
    const s = expandTemplates(parseSpec('session w*\nstep b { begin }\nstep c { commit }\nsession admin\nstep look { select 1 }\n'), 3)
    assert.deepEqual(
      s.sessions.map((x) => [x.name, x.steps.map((st) => st.name)]),
      [
        ['w1', ['w1.b', 'w1.c']],
        ['w2', ['w2.b', 'w2.c']],
        ['w3', ['w3.b', 'w3.c']],
        ['admin', ['look']],
      ],
    )
    assert.throws(() => expandTemplates(parseSpec('session s*\nstep b { begin }\nsession s2\nstep x { select 1 }\n'), 2), /template s\* makes session s2, which the spec already has/)
  })

  test('bad input: one line, file:line:column, what was expected', () => {
    bad('setup { create table t (id int);\nsession s1\n', '1:7', /unterminated sql block: expected a closing \}/)
    // A block whose } was forgotten ran on to the next block's }: reported where it opens (issue 39), not at the end.
    bad('setup { create table t (id int);\nsession s1\nstep a { select 1; }\n', '1:7', /this sql block is not closed before line 2 \("session s1"\): add its \} there/)
    bad('session s1\nstep a { select 1;\nstep b { select 2; }\n', '2:8', /not closed before line 3 \("step b \{"\)/)
    bad('session s1\nstep a { select 1; }\npermutation a zz\n', '3:15', /undefined step zz in permutation: the steps are a/)
    bad('session s1\nstep a { select 1; }\nsession s2\nstep a { select 2; }\n', '4:6', /duplicate step name a \(the first is at line 2\)/)
    bad('session s*\nstep b { begin }\nsession x\nstep look { select 1 }\npermutation b look\n', '5:13', /step b belongs to template session s\*, which --n replicates/)
    bad('setup { select 1 }\n', '2:1', /expected 'session' \(a spec needs at least one session\), got the end of the file/)
    bad('session s1\nsetup { begin; }\n', '3:1', /expected 'step' \(session s1 needs at least one step\)/)
    bad('session s1\nstep { select 1 }\n', '2:6', /expected a step name after 'step', got a \{ \.\.\. \} block/)
    bad('session s1\nstep a select 1\n', '2:8', /expected a \{ \.\.\. \} block after 'step a', got 'select'/)
    bad('session s1\nstep a { select 1 }\n$\n', '3:1', /unexpected character "\$"/)
    bad('session "s1\nstep a { select 1 }\n', '1:12', /unexpected newline in quoted identifier/)
    bad('session s1\nstep a { select 1 }\nexpect maybe\n', '3:8', /expected held or violated after 'expect', got 'maybe'/)
    bad('expect held\nexpect violated\nsession s1\nstep a { select 1 }\n', '2:1', /a second expect line: the first is at line 1/)
    bad('invariant nodesc { select true }\nsession s1\nstep a { select 1 }\n', '1:11', /expected a "quoted description" after 'invariant'/)
    bad('session s1\nstep a { select 1 }\nsession s2\nstep b { select 2 }\npermutation a(b notices) b\n', '5:24', /expected a number after 'b notices'/)
    bad('session s1\nstep a { select 1 }\nsession s2\nstep b { select 2 }\npermutation a(zz) b\n', '5:15', /undefined blocking step zz/)
    bad('session s1\nstep a { select 1 }\nstep a2 { select 1 }\npermutation a(a2) a2\n', '4:15', /cannot block on a2, a step of its own session/)
    bad('teardown { x }\nsetup { y }\nsession s1\nstep a { select 1 }\n', '2:1', /setup blocks come before the teardown block/)
    bad('session s1\nstep a { select 1 }\nsession s1\nstep b { select 1 }\n', '3:9', /duplicate session name s1/)
  })
})

describe('isolationtester output', () => {
  test('PQprint: numbers right-aligned (header too), text left, NULL and empty blank, widths in bytes', () => {
    const latin1 = (s: string) => Buffer.from(s, 'utf8').toString('latin1')
    const out = printResult({
      fields: ['id', 'v', latin1('naïve'), 'n'],
      rows: [
        ['1', 'a', latin1('é'), null],
        ['22', null, '', '-1.5e3'],
      ],
    })
    assert.equal(Buffer.from(out, 'latin1').toString('utf8'), `id|v|naïve|     n\n--+-+------+------\n 1|a|é    |      \n22| |      |-1.5e3\n(2 rows)\n\n`)
    assert.equal(printResult({ fields: [], rows: [[]] }), '', 'a result without columns prints nothing')
    assert.equal(printResult({ fields: ['x'], rows: [] }), 'x\n-\n(0 rows)\n\n')
    assert.equal(printResult({ fields: ['e'], rows: [['E5']] }), 'e \n--\nE5\n(1 row)\n\n', 'a leading E is text')
    assert.equal(printResult({ fields: ['k'], rows: [['7.']] }), 'k \n--\n7.\n(1 row)\n\n', 'a number must end in a digit')
  })

  test("libpq's message text: severity, message, DETAIL, HINT, QUERY; CONTEXT only for errors", () => {
    const f = { S: 'NOTICE', M: 'hello', D: 'd', H: 'h', W: 'PL/pgSQL function f() line 1' }
    assert.equal(formatMessage(f, false), 'NOTICE:  hello\nDETAIL:  d\nHINT:  h\n')
    assert.equal(formatMessage({ ...f, S: 'ERROR' }, true), 'ERROR:  hello\nDETAIL:  d\nHINT:  h\nCONTEXT:  PL/pgSQL function f() line 1\n')
    assert.equal(formatMessage({ S: 'ERROR', M: 'x', P: '5' }, true), 'ERROR:  x at character 5\n', 'no query text: the position as text')
  })

  test('the error cursor: LINE n and a caret, on the line of the position', () => {
    assert.equal(errorPosition('select * frm t;', 10), 'LINE 1: select * frm t;\n                 ^\n')
    assert.equal(errorPosition('insert into t values (1);\nselect id frm t;', 37), 'LINE 2: select id frm t;\n                  ^\n')
    const long = 'select ' + 'x, '.repeat(40) + 'oops from t'
    const cut = errorPosition(long, long.indexOf('oops') + 1)
    assert.match(cut, /^LINE 1: \.\.\., x, .*oops from \.\.\.\n +\^\n$/, 'a long line is cut on both sides, keeping 10 columns after the position')
    const [line, caret] = cut.split('\n')
    assert.equal(caret.indexOf('^'), line.indexOf('oops'), 'the caret stands under the position')
  })

  test('every interleaving, in isolationtester order', () => {
    const s = parseSpec('session a\nstep a1 { }\nstep a2 { }\nsession b\nstep b1 { }\n')
    assert.deepEqual(
      allPermutations(s).map((p) => p.steps.map((x) => x.name).join(' ')),
      ['a1 a2 b1', 'a1 b1 a2', 'b1 a1 a2'],
    )
    assert.equal(countPermutations(parseSpec('session a\nstep a1 { }\nstep a2 { }\nstep a3 { }\nsession b\nstep b1 { }\nstep b2 { }\nstep b3 { }\n')), 20)
  })

  test('the step timeout as each version of isolationtester reads it', () => {
    assert.equal(stepWait(150000, {}), 300_000)
    assert.equal(stepWait(150000, { PGISOLATIONTIMEOUT: '7' }), 7_000)
    assert.equal(stepWait(180004, {}), 360_000)
    assert.equal(stepWait(180004, { PG_TEST_TIMEOUT_DEFAULT: '7', PGISOLATIONTIMEOUT: '1' }), 14_000)
  })

  test("libpq's environment: PGOPTIONS, PGDATESTYLE, PGTZ, PGGEQO; 'default' means not sent; PGAPPNAME apart", () => {
    assert.deepEqual(libpqEnv({ PGOPTIONS: '-c work_mem=1MB', PGDATESTYLE: 'Postgres, MDY', PGTZ: 'default', PGAPPNAME: 'isolation/x' }), {
      params: [
        ['options', '-c work_mem=1MB'],
        ['datestyle', 'Postgres, MDY'],
      ],
      appName: 'isolation/x',
    })
  })

  test('--expected shows the closest difference as a unified diff', () => {
    const d = diffLines('a\nb\nc\n', 'a\nB\nc\n', 'expected', 'race')
    assert.equal(d.changed, 2)
    assert.match(d.text, /^--- expected\n\+\+\+ race\n@@ -1 \+1 @@\n a\n-b\n\+B\n c\n/)
    assert.equal(diffLines('same\n', 'same\n', 'a', 'b').changed, 0)
  })
})

describe('setup blocks and the schema guard (pure parts)', () => {
  test('statements, transaction control and maintenance-only blocks are read outside quotes and comments', () => {
    assert.deepEqual(statements("select ';'; -- ; comment\ndo $$ begin; end $$; select 2"), ["select ';'", 'do $$ begin; end $$', 'select 2'])
    assert.equal(transactionControl('create table t (id int); commit;'), 'commit')
    assert.equal(transactionControl("select 'begin'; rollback to savepoint a"), undefined)
    assert.equal(transactionControl('BEGIN ISOLATION LEVEL SERIALIZABLE'), 'BEGIN ISOLATION LEVEL SERIALIZABLE')
    assert.ok(maintenanceOnly('vacuum analyze t; create index concurrently i on t (id)'))
    assert.ok(!maintenanceOnly('vacuum public.t'), 'a qualified name may be outside the schema')
    assert.ok(!maintenanceOnly('create table t (id int)'))
  })

  test('what a block does outside the database is found in its statements, DO bodies and EXECUTEd strings', () => {
    assert.match(outsideReach("copy (select 1) to program 'touch /tmp/x'") ?? '', /runs a program on the server/)
    assert.match(outsideReach("COPY t FROM PROGRAM 'cat /etc/passwd'") ?? '', /runs a program on the server/)
    assert.match(outsideReach("create table t (id int); copy t to '/tmp/t.csv'") ?? '', /writes a file on the server/)
    assert.match(outsideReach("copy t to E'/tmp/t.csv' with (format csv)") ?? '', /writes a file on the server/)
    assert.match(outsideReach("do $$ begin execute 'copy (select 1) to ''/tmp/x'''; end $$") ?? '', /writes a file on the server/)
    assert.match(outsideReach("create function f() returns void language plpgsql as $f$ begin copy (select 1) to program 'id'; end $f$") ?? '', /program/)
    assert.match(outsideReach("select lo_export(1, '/tmp/x')") ?? '', /calls lo_export\(\)/)
    assert.match(outsideReach("select dblink_exec('dbname=test', 'drop table x')") ?? '', /calls dblink_exec\(\)/)
    assert.match(outsideReach('select pg_terminate_backend(pid) from pg_stat_activity') ?? '', /calls pg_terminate_backend\(\)/)
    // What stays inside: COPY to the client, from a file (it changes nothing outside), the words in strings or comments.
    assert.equal(outsideReach('copy t to stdout'), undefined)
    assert.equal(outsideReach("copy t from '/tmp/t.csv'"), undefined)
    assert.equal(outsideReach("insert into notes values ('sent to program x'); -- copy t to '/tmp/x'"), undefined)
    // A string is read as SQL too (an EXECUTE may run it): one that says copy ... to program is refused.
    assert.match(outsideReach("insert into notes values ('copy t to program x')") ?? '', /program/)
    assert.equal(outsideReach("create table copy (program text); insert into copy values ('to')"), undefined)
  })

  test("a quote, dollar quote or comment that never ends is found as PostgreSQL's scanner reads it", () => {
    assert.equal(unterminated("select 'a''b', \"x\"\"y\", $f$ ' $f$, E'\\'' /* /* */ */ -- '"), undefined)
    assert.equal(unterminated("select E'\\'"), 'a quoted string', "E'\\' escapes the quote")
    assert.equal(unterminated("select 'x"), 'a quoted string')
    assert.equal(unterminated('select $race_guard$ x'), 'a dollar-quoted string')
    assert.equal(unterminated('select 1 /* /* */'), 'a /* comment', 'block comments nest')
    assert.equal(unterminated('select "x'), 'a quoted identifier')
    assert.equal(unterminated('select a$b$ from t'), undefined, 'a $ inside an identifier starts no dollar quote')
    assert.deepEqual(statements("select E'\\''; copy t to program 'x'"), ["select E'\\''", "copy t to program 'x'"])
    assert.throws(() => specToScenario(parseSpec('setup { create table t (id int); select $q$ }\nsession s1\nstep a { select 1 }\n', 'q.spec')), {
      message: /^q\.spec:1:1: setup block 1 has a dollar-quoted string that never ends/,
    })
  })

  test('PREPARE TRANSACTION in a step (or COMMIT/ROLLBACK PREPARED) is refused before anything runs: it would outlive its session', () => {
    for (const [step, word] of [
      ["begin; insert into t values (1); prepare transaction 'x'", 'PREPARE TRANSACTION'],
      ["commit prepared 'x'", 'COMMIT PREPARED'],
    ]) {
      assert.throws(() => specToScenario(parseSpec(`setup { create table t (id int) }\nsession s1\nstep a { ${step} }\n`, 'p.spec')), {
        message: new RegExp(`^p\\.spec:3:6: session s1 runs '${word}': race does not race two-phase commit`),
      })
    }
    // The words inside a string are no statement.
    assert.doesNotThrow(() => specToScenario(parseSpec("setup { create table t (id text) }\nsession s1\nstep a { insert into t values ('prepare transaction') }\n", 'p.spec')))
  })

  test('the relations a maintenance statement names, or what it reaches when it names none', () => {
    assert.deepEqual(maintenanceTargets('vacuum full'), { all: 'vacuums every table of the database' })
    assert.deepEqual(maintenanceTargets('VACUUM (VERBOSE, ANALYZE)'), { all: 'vacuums every table of the database' })
    assert.deepEqual(maintenanceTargets('vacuum full freeze t, "Odd T" (a, b), s.u'), { names: ['t', '"Odd T"', 's.u'] })
    assert.deepEqual(maintenanceTargets('vacuum (analyze) t (id)'), { names: ['t'] })
    assert.deepEqual(maintenanceTargets('reindex schema concurrently public'), { all: 'reindexes a whole schema' })
    assert.deepEqual(maintenanceTargets('reindex (verbose) database concurrently test'), { all: 'reindexes a whole database' })
    assert.deepEqual(maintenanceTargets('reindex table concurrently t'), { names: ['t'] })
    assert.deepEqual(maintenanceTargets('create unique index concurrently if not exists i on only t using btree (id)'), { names: ['t'] })
    assert.deepEqual(maintenanceTargets('create index concurrently on "T" (id)'), { names: ['"T"'] })
    assert.deepEqual(maintenanceTargets('drop index concurrently if exists i, j'), { names: ['i', 'j'] })
    assert.deepEqual(maintenanceTargets('checkpoint'), { names: [] })
  })

  test('fingerprint differences in words: created, changed, dropped', () => {
    const before = new Map([
      ['pg_class:1:100', 'table public.a'],
      ['pg_proc:2:100', 'function public.f'],
    ])
    const after = new Map([
      ['pg_class:1:200', 'table public.a'],
      ['pg_class:3:200', 'table public.b'],
    ])
    assert.deepEqual(diff(before, after), ['changes table public.a', 'creates table public.b', 'drops function public.f'])
    assert.deepEqual(diff(before, before), [])
  })

  test('race run runs a setup block inside the guard, and race show shows the block itself', () => {
    const g = guardedSql('create table orders (id int);', 'x.spec:1: setup block 1')
    assert.match(g, /^set transaction isolation level repeatable read;/)
    assert.match(g, /raise exception using errcode = 'RX001'/)
    assert.equal(shownBlock(g), 'create table orders (id int);')
  })
})

describe('a spec as a scenario', () => {
  const text = `# Shop: one open order.
# Two sessions insert.
setup { create table orders (id serial primary key, customer_id int, status text) }
invariant "one open order" { select count(*) <= 1 from orders where status = 'open'; }
invariant "no orphan" { select true }
expect violated
session s1
setup { begin }
step ins1 { insert into orders (customer_id, status) values (1, 'open') }
step c1 { commit }
session s2
step ins2 { insert into orders (customer_id, status) values (1, 'open') }
permutation ins1 ins2 c1
permutation ins2 ins1 ins1 c1
`
  test('sessions, the first runnable permutation, invariants, expects; sound for checkScenario', () => {
    const s = specToScenario(parseSpec(text, 'dir/My_Shop.spec'), ['Shop: one open order.', 'Two sessions insert.'])
    assert.equal(s.id, 'my-shop')
    assert.equal(s.title, 'Shop: one open order.')
    assert.deepEqual(s.story, ['Two sessions insert.'])
    assert.equal(s.expects, 'violated')
    assert.equal(s.defaultSchedule, 'lockstep')
    assert.equal(s.permutation, 's1.setup s1.ins1 s2.ins2 s1.c1')
    assert.deepEqual(s.sessionCount, { default: 2, min: 2, max: 2 })
    const p = plan(s, { params: {}, n: 2, engine: 'postgres' })
    assert.deepEqual(
      p.sessions.map((x) => [x.name, x.steps.map((st) => st.name)]),
      [
        ['s1', ['setup', 'ins1', 'c1']],
        ['s2', ['ins2']],
      ],
    )
    assert.equal(
      s.invariant.sql,
      "select i0 and i1 as held, i0, i1 from (select (\nselect count(*) <= 1 from orders where status = 'open'\n) as i0, (\nselect true\n) as i1) as race_invariants",
    )
    assert.equal(s.invariant.observed!({ held: false, i0: false, i1: true }), 'one open order false')
    assert.deepEqual(checkScenario(s, {}, 2), [])
  })

  test('a template spec: --n sessions, round-robin lockstep, barrier by default', () => {
    const s = specToScenario(parseSpec('session s*\nstep b { begin }\nstep c { commit }\n', 'o.spec'))
    assert.equal(s.permutation, undefined)
    assert.equal(s.defaultSchedule, 'barrier')
    assert.equal(s.expects, 'reported')
    assert.deepEqual(s.sessionCount, { default: 2, min: 1, max: 10_000 })
    assert.deepEqual(Object.keys(s.sessions({ params: {}, n: 4, engine: 'postgres' })), ['s1', 's2', 's3', 's4'])
    assert.equal(s.invariant.sql, 'select true as held')
  })

  test('expect without an invariant, and a setup block with its own COMMIT, are refused with file:line:column', () => {
    assert.throws(() => specToScenario(parseSpec('expect held\nsession s1\nstep a { select 1 }\n', 'e.spec')), { message: /^e\.spec:1:1: expect held needs an invariant line/ })
    assert.throws(() => specToScenario(parseSpec('setup { create table t (id int); commit; }\nsession s1\nstep a { select 1 }\n', 'c.spec')), { message: /^c\.spec:1:1: setup block 1 runs 'commit'/ })
  })

  test('a --schedule written as a spec writes it (step names only) is qualified with sessions', () => {
    const p = { sessions: [{ name: 's1', steps: [{ name: 'a' }, { name: 'c' }] }, { name: 's2', steps: [{ name: 'b' }] }] }
    assert.equal(qualifyPermutation(p, 'a b c'), 's1.a s2.b s1.c')
    assert.equal(qualifyPermutation(p, 's1.a s2.b'), 's1.a s2.b')
    assert.equal(qualifyPermutation(p, 'lockstep'), 'lockstep')
    assert.equal(qualifyPermutation(p, 'a zz'), 'a zz', 'unknown names are left for the permutation reader to refuse')
  })

  test('ids from file names are kebab-case', () => {
    assert.equal(idFromFile('/x/Orders_Fixed.spec'), 'orders-fixed')
    assert.equal(idFromFile('my-race.mjs'), 'my-race')
  })
})

describe("docs/your-own-races.md's spec files", () => {
  test('the spec it shows is examples/orders.spec, and the fix differs from it in the lines it names', async () => {
    const fs = await import('node:fs')
    const path = await import('node:path')
    const { ROOT } = await import('../support/server.js')
    const md = fs.readFileSync(path.join(ROOT, 'docs', 'your-own-races.md'), 'utf8')
    const at = md.indexOf('## Spec files')
    assert.ok(at >= 0)
    const blocks = [...md.slice(at).matchAll(/```[a-z]*\n([\s\S]*?)```/g)].map((m) => m[1])
    const orders = fs.readFileSync(path.join(ROOT, 'examples', 'orders.spec'), 'utf8')
    const fixed = fs.readFileSync(path.join(ROOT, 'examples', 'orders-fixed.spec'), 'utf8')
    assert.equal(blocks[0], orders)
    const added = fixed.split('\n').filter((l) => !orders.split('\n').includes(l) && !l.startsWith('#'))
    assert.deepEqual(added, ['expect held', 'step lock { select pg_advisory_xact_lock(1) }'])
    assert.ok(blocks[2].includes(added[0]) && blocks[2].includes(added[1]))
    assert.doesNotThrow(() => parseSpec(orders, 'orders.spec'))
  })
})
