// racelab's published types as a user's project compiles them (issue 39, item 16): a race module's `db` and ctx are
// typed by its driver (`driver: 'pg'`: ctx.pool goes to a function that takes a pg.Pool, no cast), and the types
// compile in a project that installed only the driver it uses (pg and mysql2 are optional peer dependencies). Each
// project is a folder with racelab's package.json and dist/src/**/*.d.ts (what the tarball carries), its dependencies
// and the chosen drivers linked from the checkout's node_modules, and tsc run over it as a user runs it: strict,
// nodenext, and without skipLibCheck, so an error in racelab's own .d.ts counts.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, test } from 'node:test'
import ts from 'typescript'
import { ROOT } from '../support/conformance.js'

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'racelab-types-'))
after(() => fs.rmSync(work, { recursive: true, force: true }))

/** racelab's runtime dependencies a user's install brings along, plus Node's types. */
const ALWAYS = ['chalk', 'commander', 'mariadb', 'postgres', '@types/node']

/** Type-checks `files` in a fresh project holding racelab's types and `drivers`: each error as `file:line TScode`. */
function compile(name: string, drivers: string[], files: Record<string, string>): string[] {
  const proj = path.join(work, name)
  const lib = path.join(proj, 'node_modules', 'racelab')
  fs.mkdirSync(lib, { recursive: true })
  fs.copyFileSync(path.join(ROOT, 'package.json'), path.join(lib, 'package.json'))
  fs.cpSync(path.join(ROOT, 'dist', 'src'), path.join(lib, 'dist', 'src'), { recursive: true, filter: (f) => fs.statSync(f).isDirectory() || f.endsWith('.d.ts') })
  for (const p of [...ALWAYS, ...drivers]) {
    fs.mkdirSync(path.dirname(path.join(proj, 'node_modules', p)), { recursive: true })
    fs.symlinkSync(path.join(ROOT, 'node_modules', p), path.join(proj, 'node_modules', p), 'dir')
  }
  fs.writeFileSync(path.join(proj, 'package.json'), JSON.stringify({ name, private: true, type: 'module' }))
  for (const [f, text] of Object.entries(files)) fs.writeFileSync(path.join(proj, f), text)
  const program = ts.createProgram(Object.keys(files).map((f) => path.join(proj, f)), {
    strict: true,
    noEmit: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    types: ['node'],
    skipLibCheck: false,
  })
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const where = d.file ? `${path.relative(proj, d.file.fileName)}:${d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1}` : '-'
    return `${where} TS${d.code} ${ts.flattenDiagnosticMessageText(d.messageText, ' ').slice(0, 160)}`
  })
}

/** The lines of `text` that hold `// error`: where the errors must be, and the only places. */
function marked(file: string, text: string): string[] {
  return text.split('\n').flatMap((l, i) => (l.includes('// error') ? [`${file}:${i + 1}`] : []))
}

function assertErrorsAt(errors: string[], expected: string[]): void {
  assert.deepEqual([...new Set(errors.map((e) => e.split(' ')[0]))].sort(), [...expected].sort(), errors.join('\n'))
}

test("driver 'pg' with pg and @types/pg installed: db is a pg Client, ctx.pool a pg.Pool, ctx.pg the pg module; open() types session's db", () => {
  const good = `import pg from 'pg'
import { defineAppRace } from 'racelab'

async function countPending(pool: pg.Pool, user: string): Promise<number> {
  const { rows } = await pool.query<{ n: number }>('select count(*)::int as n from orders where user_id = $1', [user])
  return rows[0].n
}
async function createOrder(db: pg.ClientBase, user: string): Promise<void> {
  await db.query('insert into orders (user_id) values ($1)', [user])
}
class Orders {
  constructor(readonly pool: pg.Pool) {}
  add(user: string) { return this.pool.query('insert into orders (user_id) values ($1)', [user]) }
}

export const plain = defineAppRace({
  driver: 'pg',
  session: async (db, ctx) => {
    const client: pg.Client = db
    const n = await countPending(ctx.pool, ctx.user)
    const made: pg.Pool = new ctx.pg.Pool()
    if (n === 0) await createOrder(client, ctx.user)
    return made
  },
  invariant: 'select true',
  expect: 'held',
})

export const opened = defineAppRace({
  driver: 'pg',
  open: async (_db, ctx) => new Orders(ctx.pool),
  session: (orders, ctx) => orders.add(ctx.user),
  close: (orders) => orders.pool.end(),
  invariant: 'select true',
  expect: 'held',
})

// What open returns, annotated where it is taken (examples/app/orders-prisma.race.ts does so).
export const annotatedOpen = defineAppRace({
  driver: 'pg',
  open: (_db, ctx) => new Orders(new ctx.pg.Pool()),
  close: (orders: Orders) => orders.pool.end(),
  session: (orders: Orders, ctx) => orders.add(ctx.user),
  invariant: 'select true',
  expect: 'held',
})

export const annotated = defineAppRace({
  driver: 'pg',
  session: (db: pg.ClientBase, ctx) => createOrder(db, ctx.user),
  invariant: 'select true',
  expect: 'held',
})
`
  const bad = `import pg from 'pg'
import type { Sql } from 'postgres'
import { defineAppRace } from 'racelab'

declare function usePool(pool: pg.Pool): void
class Orders { add() {} }

export const wrongDb = defineAppRace({ // error: a pg race's db is not a postgres.js sql (no overload matches)
  driver: 'pg',
  session: (db: Sql) => db\`select 1\`,
  invariant: 'select true',
  expect: 'held',
})
export const noPool = defineAppRace({
  driver: 'postgres',
  session: (db, ctx) => usePool(ctx.pool), // error: postgres.js has no ctx.pool
  invariant: 'select true',
  expect: 'held',
})
export const notOpened = defineAppRace({
  driver: 'pg',
  open: () => new Orders(),
  session: (orders) => orders.query('select 1'), // error: session takes what open returned
  invariant: 'select true',
  expect: 'held',
})
`
  const errors = compile('with-pg', ['pg', '@types/pg'], { 'good.mts': good, 'bad.mts': bad })
  assertErrorsAt(errors, marked('bad.mts', bad))
})

test('postgres.js, mariadb and mysql2 races: db (and ctx.client) typed by the driver', () => {
  const good = `import type { Sql } from 'postgres'
import type { Connection } from 'mariadb'
import type { Connection as Promised } from 'mysql2/promise'
import type { Connection as Callback } from 'mysql2'
import { defineAppRace } from 'racelab'

export const a = defineAppRace({ driver: 'postgres', session: async (sql) => { const s: Sql = sql; await s\`select 1\` }, invariant: 'select true', expect: 'held' })
export const b = defineAppRace({ driver: 'mariadb', session: async (db) => { const c: Connection = db; await c.query('select 1') }, invariant: 'select 1', expect: 'held' })
export const c = defineAppRace({ driver: 'mysql2', session: async (db, ctx) => { const p: Promised = db; const cb: Callback = ctx.client; await p.execute('select 1'); return cb }, invariant: 'select 1', expect: 'held' })
`
  const bad = `import { defineAppRace } from 'racelab'
export const a = defineAppRace({ driver: 'mariadb', session: (db) => db.execute('select 1', [], 'not a callback', 4), invariant: 'select 1', expect: 'held' }) // error: mariadb's execute takes no 4th argument
`
  const errors = compile('with-mysql2', ['mysql2'], { 'good.mts': good, 'bad.mts': bad })
  assertErrorsAt(errors, marked('bad.mts', bad))
})

test("racelab's types compile in a project without pg, @types/pg or mysql2 (optional peers), and a mariadb race is typed", () => {
  const good = `import { defineAppRace, run, type AppCtx } from 'racelab'
export default defineAppRace({
  driver: 'mariadb',
  session: async (db, ctx: AppCtx<'mariadb'>) => { await db.query('insert into orders (user_id) values (?)', [ctx.user]) },
  invariant: 'select count(*) <= 1 from orders',
  expect: 'held',
})
// A pg race still compiles without pg's types: its db is then untyped, as before.
export const untyped = defineAppRace({ driver: 'pg', session: (db, ctx) => db.query('select 1', [ctx.user]), invariant: 'select true', expect: 'held' })
export const r = run('advisory')
`
  const errors = compile('without-peers', [], { 'good.mts': good })
  assert.deepEqual(errors, [])
})
