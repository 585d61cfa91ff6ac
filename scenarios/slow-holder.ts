// slow-holder (advisory-locks §7): the holder calls a slow external API inside the lock section. Every other
// request for the same user waits for the key, and with lock_timeout shorter than the call they fail with
// 55P03 (LockBusy); the holder's transaction and connection are busy the whole call. --outside: record the
// intent in the transaction (an outbox row), commit, then call the API: the lock section is short, nobody times
// out, the others get the business rule's 409. Its verdict is a fact read from the server, not a duration: the
// others ask for the key while the holder is about to call the API (they find it free), and pg_locks says what
// the holder holds right then (nothing).
import { anomaly, appWait, clean, defineScenario, keyBind, replicate, serialized, step, type Documented, type Params, type SessionSpec, type Variant, type Who } from '../src/scenario.js'
import { EXISTS, table } from './_shared/setup-requests.js'

const outbox = `create table outbox (
  id         bigserial primary key,
  request_id uuid        not null,
  what       text        not null,
  sent_at    timestamptz
)`

/**
 * How long each committed request held the key, measured by the server's clock, and its lock_timeout; with
 * --outside, also how many advisory locks its backend held (pg_locks) just before it called the API.
 */
const holds = `create table holds (session text primary key, held_ms numeric not null, lock_timeout_ms numeric not null, keys_at_call int)`

/** --outside, after COMMIT and right before the API call: what the server says this backend holds. */
const calling = `update holds set keys_at_call = (select count(*)::int from pg_locks where pid = pg_backend_pid() and locktype = 'advisory' and granted)
 where session = :session
returning keys_at_call`

/** Inserts the pending request and, in the same statement, what the hold measured (and the outbox row when the API call is deferred). */
function insertRequest(outside: boolean): string {
  return `with r as (insert into setup_requests (user_id, status) values (:user, 'pending') returning id)${
    outside ? `,\n     o as (insert into outbox (request_id, what) select id, 'create the customer at the payment provider' from r returning request_id)` : ''
  }
insert into holds (session, held_ms, lock_timeout_ms)
select :session, extract(epoch from clock_timestamp() - :lock.locked_at) * 1000,
       extract(epoch from current_setting('lock_timeout')::interval) * 1000
  from ${outside ? 'o' : 'r'}
returning round(held_ms, 1) as held_ms`
}

const CALL = 'call the slow external API (create the customer at the payment provider)'
const exists = ({ prior }: { prior: Record<string, { pending?: number }> }) => (prior.check?.pending ?? 0) >= 1 && EXISTS

function request(p: Params): SessionSpec {
  const head = {
    begin: 'begin',
    isolation: 'set transaction isolation level read committed',
    timeout: `select set_config('lock_timeout', '${p.lockTimeout}ms', true)`,
    lock: 'select pg_advisory_xact_lock(:key), clock_timestamp() as locked_at',
    check: `select count(*)::int as pending from setup_requests where user_id = :user and status = 'pending'`,
  }
  if (!p.outside) return { steps: { ...head, api: appWait('apiMs', CALL, { rejectIf: exists }), insert: insertRequest(false), commit: 'commit' } }
  return {
    steps: {
      ...head,
      insert: step(insertRequest(true), { rejectIf: exists }),
      commit: 'commit',
      calling,
      // After COMMIT, with no transaction and no key: the outbox worker's call, here done by the same client.
      api: appWait('apiMs', CALL),
      sent: `update outbox set sent_at = clock_timestamp() where request_id in (select id from setup_requests where user_id = :user) and sent_at is null`,
    },
  }
}

/** Well apart, the timeout and the call decide alone; closer than this, either may come first. */
const MARGIN_MS = 100

const waiters = (n: number): string[] => Array.from({ length: n - 1 }, (_, i) => `s${i + 2}`)

/** The waiters (s2..sN) each wait at least `ms`. */
const waitedAll = (n: number, ms: number): Record<string, number> => Object.fromEntries(waiters(n).map((s) => [s, ms]))

/**
 * What is documented. In lockstep s1 takes the key and every other request asks while s1 is about to call the
 * API; free-running (barrier), whoever comes first holds it, and a late request may find the key free again.
 */
function documented(v: Variant, lockstep: boolean): Documented | Documented[] {
  const n = v.n
  const timeout = Number(v.params.lockTimeout)
  const api = Number(v.params.apiMs)
  if (n === 1) return clean('one request alone', { s1: 'committed' })
  const first: Who = lockstep ? { s1: 'committed' } : { committed: 1 }
  const late = lockstep ? 0 : n - 1
  const rejected: Who = { ...first, [`rejected: ${EXISTS}`]: lockstep ? n - 1 : ([0, n - 1] as const) }
  if (v.params.outside) {
    // Lockstep: the others ask while s1 is about to call the API, after its COMMIT: the key is free, whatever the
    // timing (no lock_timeout can run out). Free-running, one may ask during the short lock section and wait.
    if (lockstep) return clean('the key is held only for check, insert and COMMIT, not through the API call: the others find it free and see the pending request', rejected)
    const why = 'the key is held only for check, insert and COMMIT: the others wait briefly, then see the pending request'
    return [serialized(why, rejected), clean('nobody was seen waiting', rejected)]
  }
  const timedOut: Documented = {
    ...anomaly('the key is held through the API call, longer than lock_timeout: the requests waiting for it fail with 55P03', {
      ...first,
      '55P03': lockstep ? n - 1 : ([0, n - 1] as const),
      ...(late ? { [`rejected: ${EXISTS}`]: [0, late] as const } : {}),
    }),
    ...(lockstep ? { waited: waitedAll(n, timeout) } : {}),
  }
  const waitedOut: Documented = {
    ...serialized('lock_timeout outlasts the API call: the others wait for it, then see the pending request', rejected),
    ...(lockstep ? { waited: waitedAll(n, api) } : {}),
  }
  if (timeout + MARGIN_MS <= api) return timedOut
  if (timeout >= api + MARGIN_MS) return lockstep ? waitedOut : [waitedOut, clean('nobody was seen waiting', rejected)]
  return [timedOut, waitedOut]
}

/**
 * One request after another nobody waits and the later ones see the pending request; but a key held through the
 * API call is still held longer than lock_timeout: the invariant is about the lock section, not about who collided.
 */
function serial(v: Variant): Documented | Documented[] {
  const who: Who = v.n > 1 ? { s1: 'committed', [`rejected: ${EXISTS}`]: v.n - 1 } : { s1: 'committed' }
  const short = clean('one request after another: nobody waits, the later ones see the pending request', who)
  if (v.params.outside) return short
  const long = anomaly('nobody waits one after another, but the key is still held through the API call, longer than lock_timeout', who)
  const timeout = Number(v.params.lockTimeout)
  const api = Number(v.params.apiMs)
  if (timeout + MARGIN_MS <= api) return long
  if (timeout >= api + MARGIN_MS) return short
  return [long, short]
}

export default defineScenario({
  id: 'slow-holder',
  title: 'a slow external API call inside the lock section: every other request waits, then 55P03',
  source: { article: 'advisory-locks', section: '7' },
  story: [
    "Every request runs §4's code for the same user: lock the user's key (with lock_timeout), check, then call an external API and insert.",
    "The API call is the client waiting --api-ms (500ms) with the transaction open and the key held: application code, not SQL.",
    'The first request holds the key through the call; the others wait in pg_advisory_xact_lock and, with lock_timeout (200ms here; the article uses 2s) shorter than the call, fail with 55P03 (LockBusy).',
    "The holder's transaction and its pooled connection are busy the whole call (§7's second problem: the pool runs dry).",
    '--outside: the transaction records the intent (an outbox row) and commits; the API is called after COMMIT. The key is held only for the check and the insert: the others, asking while the holder is about to call the API, find it free and get 409.',
    "With --outside the invariant is a fact, not a duration: pg_locks, read by the holder's backend right before the call, shows no advisory lock held.",
    "The server measures how long the key was held (clock_timestamp() from the grant to the insert) and reads lock_timeout; each waiter's wait is in the waited column.",
  ],
  params: {
    apiMs: { flag: '--api-ms <duration>', description: 'how long the external API call takes (the client waits, holding what it holds)', kind: 'duration', default: 500 },
    lockTimeout: { flag: '--lock-timeout <duration>', description: 'lock_timeout for the advisory lock, set with set_config(..., true)', kind: 'duration', default: 200 },
    outside: { flag: '--outside', description: 'call the API after COMMIT (the outbox shape): the lock section stays short', kind: 'boolean', default: false },
  },
  sessionCount: { default: 3, min: 1, max: 50 },
  isolation: 'read committed',
  setup: [table, outbox, holds],
  binds: { key: keyBind('setup_request') },
  sessions: ({ params, n }) => replicate(n, request(params)),
  // s1 takes the key; each other request asks for it while s1 is about to call the API (--outside: after its COMMIT,
  // so the others never wait, and nothing depends on how long s1's statements take on a busy machine).
  permutation: ({ params, n }) => {
    const head = (s: string) => `${s}.begin ${s}.isolation ${s}.timeout ${s}.lock`
    const rest = params.outside ? ['check', 'insert', 'commit', 'calling', 'api', 'sent'] : ['check', 'api', 'insert', 'commit']
    const tail = (s: string, steps: string[]) => steps.map((x) => `${s}.${x}`).join(' ')
    if (params.outside) {
      return [head('s1'), tail('s1', ['check', 'insert', 'commit', 'calling']), ...waiters(n).map((s) => `${head(s)} ${tail(s, rest)}`), tail('s1', ['api', 'sent'])].join(' ')
    }
    return [head('s1'), 's1.check', ...waiters(n).map(head), tail('s1', ['api', 'insert', 'commit']), ...waiters(n).map((s) => tail(s, rest))].join(' ')
  },
  defaultSchedule: 'lockstep',
  invariant: {
    description: (p) =>
      p.outside
        ? 'the request that called the API held no key while calling it (pg_locks), and at most 1 pending request'
        : 'the key is held for less than the lock_timeout other requests wait (and at most 1 pending request)',
    sql: `select case when :outside::boolean then case when h.keys_at_call is null then null else h.keys_at_call = 0 and p.pending <= 1 end
            when h.held_ms is null then null else h.held_ms < h.lock_timeout_ms and p.pending <= 1 end as held,
       h.session, round(h.held_ms)::int as held_ms, round(h.lock_timeout_ms)::int as lock_timeout_ms, h.keys_at_call, p.pending, o.outbox, o.sent
  from (select count(*)::int as pending from setup_requests where user_id = :user and status = 'pending') p
  cross join (select count(*)::int as outbox, count(sent_at)::int as sent from outbox) o
  left join holds h on true`,
    observed: (r) =>
      r.held_ms === null
        ? 'nobody committed a request'
        : `${r.session} held the key ${r.held_ms} ms (lock_timeout ${r.lock_timeout_ms} ms); ${r.pending} pending` +
          (r.outbox ? `; outbox: ${r.outbox} recorded, ${r.sent} sent after COMMIT` : '') +
          (r.keys_at_call === null || r.keys_at_call === undefined ? '' : `; advisory locks held at the API call: ${r.keys_at_call}`),
  },
  unavailable: { mysql: 'it holds pg_advisory_xact_lock with lock_timeout; MySQL has no transaction-scoped advisory lock (GET_LOCK is session-scoped)' },
  documented: {
    postgres: {
      lockstep: (v) => documented(v, true),
      serial,
      barrier: (v) => documented(v, false),
    },
  },
  checks: [
    { label: 'outside (outbox)', params: { outside: true } },
    { label: 'lock_timeout 2s', params: { lockTimeout: 2000 } },
  ],
})
