// The bench's workloads: the same transactions for race's own load generator (pipelined prepared
// statements over the wire client) and for pgbench (a generated script), so the two measure one thing.
import type { Sql } from 'postgres'
import type { BatchResult, Bound } from './wire.js'

/** What a load-generating connection can do: send a pipelined batch of prepared statements. */
export interface BenchClient {
  pid: number
  prepare(statements: Record<string, string>): Promise<void>
  run(batch: readonly Bound[]): Promise<BatchResult>
  close(): Promise<void>
  destroy(): void
}

/** One transaction: its kind (index into Workload.kinds) and its random inputs, kept across retries like pgbench. */
export interface Txn {
  kind: number
  id: number
  delta: number
  /** Checks that saw more pending requests than allowed (advisory only). */
  anomaly: boolean
}

export interface PgbenchScript {
  name: string
  weight: number
  text: string
}

export interface Workload {
  id: 'oltp' | 'advisory'
  /** Transaction kinds, counted per run to show the mix. */
  kinds: readonly string[]
  statements: Record<string, string>
  /** Tables and data, once per workload, on the control connection inside the bench schema. */
  setup(control: Sql): Promise<void>
  /** Before each cell (race's and pgbench's): the same starting state. */
  reset(control: Sql): Promise<void>
  /** Chooses the next transaction's kind and inputs (before any retry). */
  next(t: Txn): void
  /** One attempt; a result with a code means it failed and the caller rolls back. */
  attempt(c: BenchClient, t: Txn): Promise<BatchResult>
  pgbench(): PgbenchScript[]
}

export const BEGIN: Bound = { stmt: 'begin', params: [] }
export const COMMIT: Bound = { stmt: 'commit', params: [] }
export const ROLLBACK: readonly Bound[] = [{ stmt: 'rollback', params: [] }]
const TX = { begin: 'begin', commit: 'commit', rollback: 'rollback' }

const rand = (lo: number, hi: number) => lo + Math.floor(Math.random() * (hi - lo + 1))

export interface OltpOptions {
  hot: number
  hotRows: number
  rows: number
}

/** Rows a range sum covers. */
export const RANGE = 100

/**
 * The isolation article's mix: 80% point reads, 15% read-modify-write (read a balance, write it back
 * changed), 5% range sums over 100 rows; `hot` percent of accesses go to the first `hotRows` rows.
 */
export function oltp(o: OltpOptions): Workload {
  const { hot, hotRows, rows } = o
  const coldLo = hotRows + 1
  const rangeHotHi = Math.max(1, hotRows - RANGE + 1)
  const rangeColdHi = rows - RANGE + 1
  const pick = (range: boolean) =>
    Math.random() * 100 < hot ? rand(1, range ? rangeHotHi : hotRows) : rand(range ? Math.min(coldLo, rangeColdHi) : coldLo, range ? rangeColdHi : rows)
  return {
    id: 'oltp',
    kinds: ['read', 'update', 'range'],
    statements: {
      ...TX,
      read: 'select balance from accounts where id = $1',
      update: 'update accounts set balance = $2::bigint + $3 where id = $1',
      range: `select sum(balance) from accounts where id between $1 and $1 + ${RANGE - 1}`,
    },
    async setup(sql) {
      await sql.unsafe(`create table accounts (id int primary key, balance bigint not null, filler text not null) with (fillfactor = 90)`)
      await sql.unsafe(`insert into accounts select g, 0, repeat('x', 84) from generate_series(1, ${rows}) g`)
      await sql.unsafe('vacuum analyze accounts')
    },
    async reset(sql) {
      await sql.unsafe('vacuum accounts')
    },
    next(t) {
      const r = Math.random() * 100
      t.kind = r < 80 ? 0 : r < 95 ? 1 : 2
      t.id = pick(t.kind === 2)
      t.delta = rand(-100, 100)
    },
    async attempt(c, t) {
      if (t.kind === 1) {
        const r = await c.run([BEGIN, { stmt: 'read', params: [t.id] }])
        if (r.code) return r
        return c.run([{ stmt: 'update', params: [t.id, r.values[1] ?? '0', t.delta] }, COMMIT])
      }
      return c.run([{ stmt: t.kind === 0 ? 'read' : 'range', params: [t.id] }])
    },
    pgbench() {
      const choose = (range: boolean) =>
        [
          `\\set r random(1, 10000)`,
          `\\if :r <= ${Math.round(hot * 100)}`,
          `\\set id random(1, ${range ? rangeHotHi : hotRows})`,
          `\\else`,
          `\\set id random(${range ? Math.min(coldLo, rangeColdHi) : coldLo}, ${range ? rangeColdHi : rows})`,
          `\\endif`,
        ].join('\n')
      return [
        { name: 'read', weight: 80, text: `${choose(false)}\nSELECT balance FROM accounts WHERE id = :id;\n` },
        {
          name: 'update',
          weight: 15,
          text: `${choose(false)}\n\\set delta random(-100, 100)\nBEGIN;\nSELECT balance FROM accounts WHERE id = :id \\gset\nUPDATE accounts SET balance = :balance::bigint + :delta WHERE id = :id;\nCOMMIT;\n`,
        },
        { name: 'range', weight: 5, text: `${choose(true)}\nSELECT sum(balance) FROM accounts WHERE id BETWEEN :id AND :id + ${RANGE - 1};\n` },
      ]
    },
  }
}

export interface AdvisoryOptions {
  users: number
  lockTimeoutMs: number
}

/**
 * The advisory-lock article's §4 over K users: begin; set_config('lock_timeout', ..., true);
 * pg_advisory_xact_lock(key of the user); count the user's pending requests; insert one if there is none.
 * Where §4 answers 409 (a pending request exists), the bench completes that request instead, so each user
 * alternates insert and complete; otherwise every user would hold one pending request after K requests and
 * the rest of the run would be read-only 409s. A check that sees more than one pending request is counted as
 * an anomaly: the serialization broke (it does under REPEATABLE READ, §5.2).
 */
export function advisory(o: AdvisoryOptions): Workload {
  let users: string[] = []
  return {
    id: 'advisory',
    kinds: ['insert', 'complete'],
    statements: {
      ...TX,
      timeout: `select set_config('lock_timeout', '${o.lockTimeoutMs}ms', true)`,
      lock: 'select pg_advisory_xact_lock(lock_key), user_id from bench_users where id = $1',
      check: `select count(*) from setup_requests where user_id = $1 and status = 'pending'`,
      insert: `insert into setup_requests (user_id, status) values ($1, 'pending')`,
      complete: `update setup_requests set status = 'completed' where user_id = $1 and status = 'pending'`,
    },
    async setup(sql) {
      await sql.unsafe(`create table setup_requests (
        id         uuid        primary key default gen_random_uuid(),
        user_id    uuid        not null,
        status     text        not null check (status in ('pending', 'completed', 'cancelled')),
        created_at timestamptz not null default now())`)
      await sql.unsafe(`create index setup_requests_user_status on setup_requests (user_id, status)`)
      // The article's advisory_key(): sha256('setup_request:' || user_id), first 8 bytes, signed big-endian.
      await sql.unsafe(`create table bench_users (id int primary key, user_id uuid not null, lock_key bigint not null)`)
      await sql.unsafe(`insert into bench_users
        select g, u, ('x' || encode(substr(sha256(convert_to('setup_request:' || u::text, 'UTF8')), 1, 8), 'hex'))::bit(64)::bigint
        from (select g, gen_random_uuid() as u from generate_series(1, ${o.users}) g) s`)
      await sql.unsafe('vacuum analyze bench_users')
      const rows = await sql.unsafe(`select user_id::text as u from bench_users order by id`)
      users = ['', ...rows.map((r) => String(r.u))]
    },
    async reset(sql) {
      await sql.unsafe('truncate setup_requests')
    },
    next(t) {
      t.id = rand(1, o.users)
      t.kind = 0
      t.anomaly = false
    },
    async attempt(c, t) {
      const user = users[t.id]
      const r = await c.run([BEGIN, { stmt: 'timeout', params: [] }, { stmt: 'lock', params: [t.id] }, { stmt: 'check', params: [user] }])
      if (r.code) return r
      const pending = Number(r.values[3])
      t.anomaly = pending > 1
      t.kind = pending >= 1 ? 1 : 0
      return c.run([{ stmt: t.kind === 1 ? 'complete' : 'insert', params: [user] }, COMMIT])
    },
    pgbench() {
      return [
        {
          name: 'advisory',
          weight: 1,
          text: [
            `\\set u random(1, ${o.users})`,
            `BEGIN;`,
            `SELECT set_config('lock_timeout', '${o.lockTimeoutMs}ms', true);`,
            `SELECT pg_advisory_xact_lock(lock_key), user_id FROM bench_users WHERE id = :u \\gset`,
            `SELECT count(*) AS pending FROM setup_requests WHERE user_id = :user_id AND status = 'pending' \\gset`,
            `\\if :pending >= 1`,
            `UPDATE setup_requests SET status = 'completed' WHERE user_id = :user_id AND status = 'pending';`,
            `\\else`,
            `INSERT INTO setup_requests (user_id, status) VALUES (:user_id, 'pending');`,
            `\\endif`,
            `COMMIT;`,
            '',
          ].join('\n'),
        },
      ]
    },
  }
}

/**
 * The isolation article's "パフォーマンスへの影響" table: throughput relative to READ COMMITTED = 1.0 under
 * an 80/15/5 OLTP mix, "based on published benchmarks and industry observation". PostgreSQL's SERIALIZABLE
 * is SSI, so race compares with the SSI column; the 2PL column (MySQL) is kept for the JSON and HTML.
 */
export const ARTICLE = {
  ratios: [
    { contention: 'low', hot: 1, rc: 1.0, rr: 0.95, serializable2pl: 0.85, ssi: 0.92 },
    { contention: 'medium', hot: 10, rc: 1.0, rr: 0.9, serializable2pl: 0.6, ssi: 0.82 },
    { contention: 'high', hot: 50, rc: 1.0, rr: 0.85, serializable2pl: 0.3, ssi: 0.65 },
    { contention: 'read-only', hot: null, rc: 1.0, rr: 0.99, serializable2pl: 0.95, ssi: 0.98 },
  ],
  latencyMs: [
    { level: 'read committed', p50: 2, p99: 12, ratio: 6 },
    { level: 'repeatable read', p50: 2, p99: 18, ratio: 9 },
    { level: 'serializable (2PL)', p50: 3, p99: 150, ratio: 50 },
    { level: 'serializable (SSI)', p50: 2, p99: 25, ratio: 12.5 },
  ],
} as const

/** The article's published ratio for an oltp cell at this hot percentage and level, if it published one. */
export function articleRatio(workload: string, hot: number | null, level: string, serializable: 'ssi' | '2pl' = 'ssi'): number | null {
  if (workload !== 'oltp' || hot === null) return null
  const row = ARTICLE.ratios.find((r) => r.hot === hot)
  if (!row) return null
  const ser = serializable === '2pl' ? row.serializable2pl : row.ssi
  return level === 'read committed' ? row.rc : level === 'repeatable read' ? row.rr : level === 'serializable' ? ser : null
}
