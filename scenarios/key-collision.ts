// key-collision (advisory-locks §8.2, §8.3): two different users whose lock keys collide wait for each other:
// false contention, never a broken invariant. With the article's 64-bit key a collision cannot be found, so race
// shows it where §8.3 says it becomes likely: a UUID squeezed into 32 bits (the two-int form's second argument).
// A birthday search over generated UUIDs finds a colliding pair at run time (never a pair written down); user B
// waits for user A, both requests succeed. --bits 64: the same two users, the 64-bit key, nobody waits.
import { createHash, randomUUID } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { advisoryKey, clean, defineScenario, serialized, step, type Bind, type BindCtx, type SessionSpec } from '../src/scenario.js'
import { EXISTS, table } from './_shared/setup-requests.js'

/** The namespace number of the two-int form (§8.3: first argument the use, second the resource). */
const NAMESPACE = 1

/** §8.3's squeeze: sha256('setup_request:<uuid>'), first 4 bytes, big-endian, signed: an int4. */
export function key32(uuid: string): number {
  return createHash('sha256').update(`setup_request:${uuid}`).digest().readInt32BE(0)
}

interface Found {
  a: string
  b: string
  key: number
  hashes: number
  ms: number
}

const found = new Map<string, Found>()

/** A birthday search: hash fresh random UUIDs (v4) into 32 bits until two differ but hash the same. Once per trial. */
export function search(user: string): Found {
  const known = found.get(user)
  if (known) return known
  const t0 = performance.now()
  const seen = new Map<number, string>()
  for (let i = 0; ; i++) {
    const uuid = randomUUID()
    const k = key32(uuid)
    const other = seen.get(k)
    if (other !== undefined && other !== uuid) {
      const f = { a: other, b: uuid, key: k, hashes: i + 1, ms: Math.round((performance.now() - t0) * 10) / 10 }
      if (found.size > 100) found.clear()
      found.set(user, f)
      return f
    }
    seen.set(k, uuid)
  }
}

const pick = (describe: string, value: (f: Found, ctx: BindCtx) => string | number | bigint): Bind => ({ describe, value: (ctx) => value(search(ctx.user), ctx) })

function request(who: 'a' | 'b', bits: string): SessionSpec {
  const user = pick("this session's user of the colliding pair the search found (a: user A, b: user B)", (f) => f[who])
  const key =
    bits === '32'
      ? pick("sha256('setup_request:' || this session's user), first 4 bytes, signed (an int4)", (f) => key32(f[who]))
      : pick("sha256('setup_request:' || this session's user), first 8 bytes, signed (§8.1)", (f) => advisoryKey('setup_request', f[who]))
  const steps: SessionSpec['steps'] = {
    begin: 'begin',
    lock: bits === '32' ? 'select pg_advisory_xact_lock(:namespace, :key)' : 'select pg_advisory_xact_lock(:key)',
    check: `select count(*)::int as pending from setup_requests where user_id = :user and status = 'pending'`,
    insert: step(`insert into setup_requests (user_id, status) values (:user, 'pending')`, {
      rejectIf: ({ prior }) => prior.check.pending >= 1 && EXISTS,
    }),
    commit: 'commit',
  }
  return { binds: { user, key }, steps }
}

const BOTH = { a: 'committed', b: 'committed' }

export default defineScenario({
  id: 'key-collision',
  title: 'two users whose keys collide wait for each other: false contention, nothing broken',
  source: { article: 'advisory-locks', section: '8.2' },
  story: [
    "§8.2: a key is a hash, so two different resources may share one; then they wait for each other (false contention), and mutual exclusion still holds.",
    "§8.3: squeezing a UUID into 32 bits (pg_advisory_xact_lock(namespace, resource), the second argument an int4) makes that likely; with 64 bits it is not.",
    'race finds a colliding pair at run time: a birthday search that hashes generated UUIDs into 32 bits until two different ones hash the same (tens of thousands of hashes).',
    "User A and user B each run §4's request for themselves. With the 32-bit key, B waits in pg_advisory_xact_lock until A commits, then both succeed.",
    '--bits 64: the same two users, the 64-bit key of §8.1: they never wait for each other.',
  ],
  params: {
    bits: { flag: '--bits <bits>', description: 'key width: 32 (the two-int form, a UUID squeezed into its second argument) or 64 (§8.1)', kind: 'choice', choices: ['32', '64'], default: '32' },
  },
  sessionCount: { default: 2, min: 2, max: 2 },
  isolation: 'read committed',
  // The search runs as the setup's binds are computed (before the sessions start), and its result is written down.
  setup: [
    table,
    `create table search (user_a uuid not null, user_b uuid not null, bits int not null, key_a bigint not null, key_b bigint not null, hashes int not null, search_ms numeric not null)`,
    `insert into search values (:userA, :userB, :bits::int, :keyA, :keyB, :hashes, :searchMs)`,
  ],
  binds: {
    namespace: { describe: `${NAMESPACE}: the number of the setup_request use (the two-int form's first argument)`, value: () => NAMESPACE },
    userA: pick('user A: the first of the colliding pair', (f) => f.a),
    userB: pick('user B: the second of the colliding pair', (f) => f.b),
    keyA: pick("user A's key (as its request takes it: --bits wide)", (f, ctx) => (ctx.params.bits === '32' ? key32(f.a) : advisoryKey('setup_request', f.a))),
    keyB: pick("user B's key (as its request takes it: --bits wide)", (f, ctx) => (ctx.params.bits === '32' ? key32(f.b) : advisoryKey('setup_request', f.b))),
    hashes: pick('how many UUIDs the search hashed', (f) => f.hashes),
    searchMs: pick('how long the search took (ms, in race)', (f) => f.ms),
  },
  sessions: ({ params }) => ({ a: request('a', String(params.bits)), b: request('b', String(params.bits)) }),
  permutation: 'a.begin a.lock b.begin b.lock a.check a.insert a.commit b.check b.insert b.commit',
  defaultSchedule: 'lockstep',
  invariant: {
    description: 'each of the two users has exactly one pending request (a collision costs a wait, never a request)',
    sql: `select case when s.user_a is null then null else pa = 1 and pb = 1 and s.user_a <> s.user_b end as held,
       s.user_a, s.user_b, s.bits, s.key_a, s.key_b, s.hashes, s.search_ms, pa, pb
  from (select 1) one
  left join search s on true
  cross join lateral (select count(*) filter (where user_id = s.user_a)::int as pa, count(*) filter (where user_id = s.user_b)::int as pb
                        from setup_requests where status = 'pending') p`,
    observed: (r) =>
      r.user_a === null
        ? 'the search result was not recorded'
        : `users ${r.user_a} and ${r.user_b} (a 32-bit collision found after ${Number(r.hashes).toLocaleString('en-US')} hashes in ${r.search_ms} ms): ` +
          `${r.key_a === r.key_b ? `one ${r.bits}-bit key ${r.key_a}` : `${r.bits}-bit keys ${r.key_a} and ${r.key_b}`}; pending: A ${r.pa}, B ${r.pb}`,
  },
  unavailable: { mysql: "it uses pg_advisory_xact_lock(int, int), PostgreSQL's two-int key; GET_LOCK takes a string name" },
  documented: {
    postgres: {
      lockstep: (v) =>
        v.params.bits === '32'
          ? serialized('the two users share the key: B waits for A (false contention), then both commit', BOTH)
          : clean('64-bit keys differ: neither waits', BOTH),
      serial: clean('one after the other: nobody waits', BOTH),
    },
  },
  checks: [{ label: '64-bit key', params: { bits: '64' } }],
})
