// The soundness harness's generator (issue 38, item 5): small races over the features whose footprints race must
// get right, each as a spec file or as an application race module. Seeded: generate(seed, i) is the same case for
// the same (seed, i), whatever else is drawn, so a slice of a soak is the same slice again.
//
// A race is built from one template (what the sessions do: check-then-insert, ON CONFLICT, a trigger, a deferred
// constraint, a cascade, a sequence, advisory locks, a job queue...) and modifiers drawn around it: 2 or 3 sessions,
// the isolation level, whether the steps run in a transaction, outside one (autocommit) or as one string of several
// statements, and an observer: a step that reads the template's state (directly, through a view, a function, a
// function's EXCEPTION block, a rolled-back savepoint, pg_locks or pg_lock_status()) and records it where the
// invariant can compare it with the state at the end (a table, or an unlogged sequence whose setval takes no
// transaction id). So the invariant's value depends on the interleaving: outcomes differ from one order to another.

export type Level = 'read committed' | 'repeatable read' | 'serializable'
export type Mode = 'txn' | 'autocommit' | 'multi'

export interface Case {
  /** seed-index, e.g. "7-0042": generate(7, 42) makes it again. */
  id: string
  kind: 'spec' | 'app'
  /** A file name for it: <id>-<template>.spec or .race.mjs. */
  file: string
  text: string
  /** What it exercises: the template, its variants, the mode, the level, the observer (see figures in the soak). */
  features: string[]
  sessions: number
}

/** A small deterministic generator (mulberry32). */
export function rng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

type Rand = () => number
const pick = <T>(r: Rand, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]
const chance = (r: Rand, p: number) => r() < p

/** What a template gives: its tables, each session's operations, its own part of the invariant, and its state. */
interface Template {
  name: string
  features: string[]
  setup: string[]
  /** Session i's operations (i from 1). */
  ops: (i: number) => string[]
  /** A boolean SQL expression over the final state (may depend on the order), or null. */
  part: { desc: string; sql: string } | null
  /** An integer SQL expression of the state an observer reads and the invariant reads again at the end. */
  state: string
  /** Needs a transaction around its steps (a deferred constraint is checked at COMMIT). */
  txnOnly?: boolean
  /** Its state is database-wide (pg_locks): observed through a view over pg_locks or pg_lock_status(). */
  lockState?: boolean
  /** Sessions that observe rather than act (the advisory holder has one actor). */
  actors?: number
}

function templates(r: Rand, key: number): Template[] {
  const who = (i: number) => `'s${i}'`
  const s1wins = (table: string, col = 'who', where = 'k = 1') => ({ desc: 's1 won', sql: `coalesce((select ${col} from ${table} where ${where}), '') = 's1'` })
  const out: Template[] = []

  // check-then-insert, plain or through a PL/pgSQL function that checks and inserts
  {
    const viaFunction = chance(r, 0.35)
    const stmt = 'insert into t (k, who) select 1, %W where not exists (select 1 from t where k = 1)'
    out.push({
      name: 'check-insert',
      features: ['check-insert', ...(viaFunction ? ['function-op'] : [])],
      setup: [
        'create table t (k int not null, who text)',
        ...(viaFunction ? [`create function claim(w text) returns void language plpgsql as $$ begin if not exists (select 1 from t where k = 1) then insert into t (k, who) values (1, w); end if; end $$`] : []),
      ],
      ops: (i) => [viaFunction ? `select claim(${who(i)})` : stmt.replace('%W', who(i))],
      part: { desc: 'at most one row for k 1', sql: '(select count(*) <= 1 from t where k = 1)' },
      state: '(select count(*) from t)',
    })
  }
  // the same, with a transaction-level advisory lock first (the fix)
  out.push({
    name: 'advisory-lock',
    features: ['advisory-lock', 'check-insert'],
    setup: ['create table t (k int not null, who text)'],
    ops: (i) => [`select pg_advisory_xact_lock(${key})`, `insert into t (k, who) select 1, ${who(i)} where not exists (select 1 from t where k = 1)`],
    part: { desc: 'at most one row for k 1', sql: '(select count(*) <= 1 from t where k = 1)' },
    state: '(select count(*) from t)',
  })
  // try-lock: who got the lock
  out.push({
    name: 'try-lock',
    features: ['try-lock'],
    setup: ['create table got (who text, ok boolean)'],
    ops: (i) => [`insert into got select ${who(i)}, pg_try_advisory_xact_lock(${key})`],
    part: { desc: 'exactly one session got the lock', sql: '(select count(*) filter (where ok) = 1 from got)' },
    state: '(select count(*) from got where ok)',
  })
  // ON CONFLICT: do nothing (first one wins) or do update (a counter); or a PL/pgSQL EXCEPTION block that swallows 23505
  {
    const variant = pick(r, ['nothing', 'update', 'exception'] as const)
    out.push({
      name: 'on-conflict',
      features: variant === 'exception' ? ['exception-op', 'unique'] : ['on-conflict'],
      setup: [
        'create table t (k int primary key, who text, v int not null default 1)',
        ...(variant === 'exception' ? [`create function try_claim(w text) returns void language plpgsql as $$ begin insert into t (k, who) values (1, w); exception when unique_violation then null; end $$`] : []),
      ],
      ops: (i) => [
        variant === 'nothing'
          ? `insert into t (k, who) values (1, ${who(i)}) on conflict (k) do nothing`
          : variant === 'update'
            ? `insert into t (k, who) values (1, ${who(i)}) on conflict (k) do update set v = t.v + 1, who = excluded.who`
            : `select try_claim(${who(i)})`,
      ],
      part: variant === 'update' ? { desc: 's2 wrote last', sql: `coalesce((select who from t where k = 1), '') = 's2'` } : s1wins('t'),
      state: variant === 'update' ? '(select coalesce(max(v), 0) from t)' : '(select count(*) from t)',
    })
  }
  // an AFTER INSERT trigger keeps a counter; deferred: a constraint trigger that runs at COMMIT
  for (const deferred of [false, true]) {
    out.push({
      name: deferred ? 'deferred-trigger' : 'trigger',
      features: [deferred ? 'deferred-trigger' : 'trigger'],
      setup: [
        'create table t (id int, who text)',
        'create table u (n int not null)',
        'insert into u values (0)',
        `create function bump() returns trigger language plpgsql as $$ begin update u set n = n + 1; return null; end $$`,
        deferred ? 'create constraint trigger bump after insert on t deferrable initially deferred for each row execute function bump()' : 'create trigger bump after insert on t for each row execute function bump()',
      ],
      ops: (i) => [`insert into t values (${i}, ${who(i)})`],
      part: null,
      state: '(select n from u)',
      actors: 1 + (chance(r, 0.5) ? 1 : 0),
      ...(deferred ? { txnOnly: true } : {}),
    })
  }
  // a deferred unique constraint: the loser fails at COMMIT
  out.push({
    name: 'deferred-unique',
    features: ['deferred-constraint'],
    setup: ['create table t (k int, who text, constraint one_k unique (k) deferrable initially deferred)'],
    ops: (i) => [`insert into t values (1, ${who(i)})`],
    part: s1wins('t'),
    state: '(select count(*) from t)',
    txnOnly: true,
  })
  // a foreign key with ON DELETE CASCADE: s1 deletes the parent, the others add children
  out.push({
    name: 'fk-cascade',
    features: ['fk-cascade'],
    setup: ['create table parent (id int primary key)', 'create table child (id serial, pid int not null references parent on delete cascade, who text)', 'insert into parent values (1)', 'insert into child (pid, who) values (1, null)'],
    ops: (i) => [i === 1 ? 'delete from parent where id = 1' : `insert into child (pid, who) values (1, ${who(i)})`],
    part: null,
    state: '(select count(*) from child)',
  })
  // a sequence: who drew 1
  out.push({
    name: 'sequence',
    features: ['sequence'],
    setup: ['create sequence ids', 'create table t (k bigint, who text)'],
    ops: (i) => [`insert into t values (nextval('ids'), ${who(i)})`],
    part: s1wins('t'),
    state: "(select coalesce(max(k), 0) from t)",
  })
  // a job queue: FOR UPDATE, SKIP LOCKED or NOWAIT
  {
    const lock = pick(r, ['for update', 'for update skip locked', 'for update nowait'] as const)
    out.push({
      name: 'queue',
      features: [lock === 'for update' ? 'for-update' : lock === 'for update nowait' ? 'nowait' : 'skip-locked'],
      setup: ['create table jobs (id int primary key, taken text)', 'insert into jobs values (1, null), (2, null)'],
      ops: (i) => [`update jobs set taken = ${who(i)} where id = (select id from jobs where taken is null order by id limit 1 ${lock})`],
      part: { desc: 's1 took job 1', sql: `coalesce((select taken from jobs where id = 1), '') = 's1'` },
      state: '(select count(*) from jobs where taken is not null)',
    })
  }
  // one session holds an advisory lock; the others look at pg_locks (through a view, or pg_lock_status())
  out.push({
    name: 'advisory-seen',
    features: ['advisory-lock'],
    setup: [],
    ops: (i) => (i === 1 ? [`select pg_advisory_xact_lock(${key})`] : []),
    part: null,
    state: '',
    lockState: true,
    actors: 1,
  })
  return out
}

/** How an observer reads the state: the features it adds and the SQL of the value. */
function observeThrough(r: Rand, t: Template, key: number, txn: boolean): { features: string[]; setup: string[]; value: string; wrap: (s: string) => string; channel?: 'seq' } {
  const id = (s: string) => s
  if (t.lockState) {
    if (chance(r, 0.5)) return { features: ['pg_locks-view'], setup: [`create view held as select objid from pg_catalog.pg_locks where locktype = 'advisory' and objid = ${key} and granted`], value: '(select count(*) from held)', wrap: id }
    return { features: ['pg_lock_status'], setup: [], value: `(select count(*) from pg_lock_status() l where l.locktype = 'advisory' and l.objid = ${key} and l.granted)`, wrap: id }
  }
  const how = pick(r, txn ? (['direct', 'view', 'function', 'exception', 'savepoint'] as const) : (['direct', 'view', 'function', 'exception'] as const))
  if (how === 'direct') return { features: [], setup: [], value: t.state, wrap: id }
  if (how === 'view') return { features: ['view'], setup: [`create view state_v as select ${t.state}::bigint as v`], value: '(select v from state_v)', wrap: id }
  if (how === 'function') return { features: ['function-read'], setup: [`create function state_f() returns bigint language plpgsql as $$ begin return ${t.state}; end $$`], value: 'state_f()', wrap: id }
  if (how === 'exception')
    return {
      features: ['exception-block'],
      setup: [`create function peek() returns bigint language plpgsql as $$ declare v bigint; begin begin v := ${t.state}; raise exception 'undo'; exception when others then null; end; return v; end $$`],
      value: 'peek()',
      wrap: id,
    }
  // read inside a savepoint that is rolled back: what it read survives only in a sequence's setval
  return { features: ['savepoint'], setup: [], value: t.state, wrap: (s) => `savepoint sp; ${s}; rollback to savepoint sp`, channel: 'seq' }
}

interface Built {
  template: string
  features: string[]
  setup: string[]
  /** Each session's steps (SQL), and the session-level setting of its isolation level when outside a transaction. */
  steps: string[][]
  level: Level
  connectionLevel: Level | null
  invariant: { desc: string; sql: string }
}

function build(seed: number, index: number, maxSteps: 2 | 3): Built {
  const r = rng((seed * 1_000_003 + index * 7919) >>> 0)
  // advisory keys of this case only: other races on the same database never share them
  const key = 800_000_000 + ((seed * 100_003 + index) % 100_000_000)
  const all = templates(r, key)
  const t = pick(r, all)
  let n = chance(r, 0.15) ? 3 : 2
  const level = pick(r, ['read committed', 'repeatable read', 'serializable'] as const)
  // three sessions whose actors would each be three points or more (two statements: the advisory lock, then the
  // insert; a NOWAIT/SKIP LOCKED at REPEATABLE READ or above: its snapshot point) are drawn as two: their exhaustive
  // oracle would be hundreds of runs
  if (n === 3 && (t.ops(1).length > 1 || (t.name === 'queue' && !t.features.includes('for-update') && level !== 'read committed'))) n = 2
  const needsTxn = t.txnOnly === true || t.lockState === true
  let mode: Mode = needsTxn ? 'txn' : pick(r, ['txn', 'txn', 'autocommit', 'multi'] as const)
  // three sessions: one step each (6 orders), so the exhaustive oracle stays small; a race that needs a transaction
  // has it inside that step (begin; ...; commit)
  if (n === 3 && mode !== 'multi') mode = 'multi'
  const txn = mode === 'txn' || (mode === 'multi' && (needsTxn || chance(r, 0.5)))
  const features = new Set<string>(t.features)
  const setup = [...t.setup]
  // three sessions: at most two act and the third observes. race explore runs each statement of a step as a point
  // of its own: a session that acted and observed in its one step would be three points, and the exhaustive oracle
  // of three such sessions hundreds of runs (two sessions are drawn as before)
  const actors = Math.min(t.actors ?? n, n === 3 ? 2 : n)
  // the observers: the sessions after the actors, else (all act) one or two sessions observe after acting
  const observe = t.part === null || t.lockState || chance(r, 0.7) || n === 3
  const observers: number[] = []
  if (observe) {
    if (actors < n) for (let i = actors + 1; i <= n; i++) observers.push(i)
    else observers.push(pick(r, Array.from({ length: n }, (_, k) => k + 1)))
  }
  let ob: ReturnType<typeof observeThrough> | null = null
  let channel: 'table' | 'seq' = 'table'
  if (observers.length) {
    // three sessions: no savepoint observer (its ROLLBACK TO is a point of its own)
    ob = observeThrough(r, t, key, txn && n !== 3)
    for (const f of ob.features) features.add(f)
    setup.push(...ob.setup)
    channel = ob.channel ?? (chance(r, 0.5) ? 'seq' : 'table')
    features.add(channel === 'seq' ? 'observe-seq' : 'observe-table')
    if (channel === 'table') setup.push('create table obs (who text, v bigint)')
    else for (const i of observers) setup.push(`create unlogged sequence seen_s${i} minvalue 0 start 0`)
  }
  const observeStep = (i: number): string => {
    const value = ob!.value
    const sql = channel === 'table' ? `insert into obs select 's${i}', ${value}` : `select setval('seen_s${i}', ${value}, true)`
    return ob!.wrap(sql)
  }
  const finalState = t.lockState ? '0' : t.state
  const parts: { desc: string; sql: string }[] = []
  if (t.part) parts.push(t.part)
  if (observers.length) {
    if (channel === 'table') parts.push({ desc: 'every observer saw the final state', sql: `(select coalesce(bool_and(v = ${finalState}), true) from obs)` })
    else for (const i of observers) parts.push({ desc: `s${i} saw the final state`, sql: `(select not is_called or last_value = ${finalState} from seen_s${i})` })
  }
  // a savepoint around the operation (released) now and then
  const savepointOps = txn && chance(r, 0.15)
  if (savepointOps) features.add('savepoint')
  const steps: string[][] = []
  for (let i = 1; i <= n; i++) {
    let ops = i <= actors ? t.ops(i) : []
    if (savepointOps) ops = ops.map((o) => `savepoint a; ${o}; release savepoint a`)
    if (observers.includes(i)) ops = [...ops, observeStep(i)]
    const begin = `begin isolation level ${level}`
    // at most maxSteps steps a session (20 orders for two sessions of 3, 6 of 2), one for three sessions (6 orders)
    if (mode === 'txn' && maxSteps === 2) steps.push(ops.length ? [`${begin}; ${ops.join('; ')}`, 'commit'] : [begin, 'commit'])
    else if (mode === 'txn') {
      if (ops.length === 0) steps.push([begin, 'commit'])
      else if (ops.length === 1) steps.push(chance(r, 0.3) ? [`${begin}; ${ops[0]}`, 'commit'] : [begin, ops[0], 'commit'])
      else steps.push(chance(r, 0.5) ? [`${begin}; ${ops[0]}`, ops.slice(1).join('; '), 'commit'] : [begin, ops.join('; '), 'commit'])
    } else if (mode === 'autocommit' && n === 2) steps.push(ops.length > maxSteps ? [...ops.slice(0, maxSteps - 1), ops.slice(maxSteps - 1).join('; ')] : ops)
    else steps.push([(txn ? [begin, ...ops, 'commit'] : ops).join('; ')])
  }
  features.add(mode === 'txn' ? 'transaction' : mode === 'autocommit' ? 'autocommit' : txn ? 'multi-statement-txn' : 'multi-statement')
  // outside a transaction the level is the session's default
  const connectionLevel = mode === 'txn' || txn ? null : level
  features.add(level.replace(' ', '-'))
  features.add(`${n}-sessions`)
  const invariant = { desc: parts.map((p) => p.desc).join(' and '), sql: `select ${parts.map((p) => p.sql).join(' and ')}` }
  return { template: t.name, features: [...features], setup, steps, level, connectionLevel, invariant }
}

/** Step names unique across a spec: session 1's a1 b1 c1, session 2's a2 b2 ... */
const stepName = (session: number, k: number) => `${'abcdefgh'[k]}${session}`

function specText(b: Built, id: string): string {
  const lines = [`# soundness case ${id}: ${b.features.join(', ')}`]
  // one setup block: race checks each block against the catalogs (nothing outside its schema), once a block
  if (b.setup.length) lines.push(`setup {\n${b.setup.map((s) => `  ${s};`).join('\n')}\n}`)
  lines.push(`invariant "${b.invariant.desc}" { ${b.invariant.sql} }`, 'expect held')
  b.steps.forEach((steps, k) => {
    const i = k + 1
    lines.push('', `session s${i}`)
    // always a session setup block: `race run`'s barrier comes after a session's first step, and a first step that
    // waits for a lock would hold every other session before the barrier (they then time out)
    lines.push(`setup { set default_transaction_isolation = '${b.connectionLevel ?? b.level}' }`)
    steps.forEach((sql, j) => lines.push(`step ${stepName(i, j)} { ${sql} }`))
  })
  return lines.join('\n') + '\n'
}

function appText(b: Built, id: string): string {
  const steps = Object.fromEntries(b.steps.map((s, k) => [`s${k + 1}`, s]))
  return [
    `// soundness case ${id}: ${b.features.join(', ')}`,
    `const steps = ${JSON.stringify(steps, null, 2)}`,
    '',
    'export default {',
    "  driver: 'pg',",
    `  sessions: ${b.steps.length},`,
    `  setup: ${JSON.stringify(b.setup, null, 2).replace(/\n/g, '\n  ')},`,
    ...(b.connectionLevel ? [`  connection: { default_transaction_isolation: '${b.connectionLevel}' },`] : []),
    '  session: async (db, ctx) => {',
    '    for (const q of steps[ctx.session]) await db.query(q)',
    '  },',
    `  invariant: ${JSON.stringify(b.invariant.sql)},`,
    "  expect: 'held',",
    '}',
    '',
  ].join('\n')
}

/**
 * Case i of seed: a spec file (about two in three) or an application race. maxSteps: the most steps a session of
 * two has (default 3; 2 keeps the exhaustive oracle at 6 orders, for npm test's slice).
 */
export function generate(seed: number, index: number, o: { maxSteps?: 2 | 3 } = {}): Case {
  const b = build(seed, index, o.maxSteps ?? 3)
  const kind = rng((seed * 31 + index * 17 + 5) >>> 0)() < 0.35 ? 'app' : 'spec'
  const id = `${seed}-${String(index).padStart(4, '0')}`
  const text = kind === 'spec' ? specText(b, id) : appText(b, id)
  return { id, kind, file: `${id}-${b.template}${kind === 'spec' ? '.spec' : '.race.mjs'}`, text, features: [kind === 'spec' ? 'spec' : 'app', ...b.features], sessions: b.steps.length }
}

/** Cases from..from+count-1 of seed. */
export function generateMany(seed: number, count: number, from = 0): Case[] {
  return Array.from({ length: count }, (_, k) => generate(seed, from + k))
}

/** The features a kept case's file names on its first line (`# soundness case ID: f1, f2` or `// ...`). */
export function featuresOf(text: string): string[] {
  const m = /^(?:#|\/\/) soundness case [^:]*: (.*)$/m.exec(text)
  return m ? m[1].split(',').map((s) => s.trim()).filter(Boolean) : []
}

/** A kept case (test/soundness/cases/): its kind from its name, its sessions and features from its text. */
export function caseOfFile(file: string, text: string): Case {
  const base = file.split('/').pop()!
  const kind = base.endsWith('.spec') ? 'spec' : 'app'
  const sessions = kind === 'spec' ? (text.match(/^session\s/gm) ?? []).length : Number(/^\s*sessions:\s*(\d+)/m.exec(text)?.[1] ?? 2)
  return { id: base.replace(/\.(spec|race\.mjs)$/, ''), kind, file: base, text, features: [kind, ...featuresOf(text).filter((f) => f !== kind)], sessions }
}
