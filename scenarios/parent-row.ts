// parent-row (advisory §2): locking the user's existing row (SELECT ... FROM users ... FOR UPDATE) before the
// check serializes check-then-insert: held, the second request waits and gets 409. The price: an unrelated
// profile update of the same user waits behind those locks too (the collateral wait, shown in `waited`).
import { defineScenario, expectBy, type SessionSpec } from '../src/scenario.js'
import { checkExists, insertUnlessFound, invariant, table } from './_fixtures/setup-requests.js'

const users = `create table users (id uuid primary key, name text not null default '')`

const request: SessionSpec = {
  steps: {
    begin: 'begin',
    lock: {
      sql: `select 1 from users where id = :user for update -- the parent row always exists`,
      run: (sql, ctx) => sql`select 1 as locked from users where id = ${ctx.user} for update`,
    },
    check: checkExists(),
    insert: insertUnlessFound,
    commit: 'commit',
  },
  racePoint: 'check',
}

export default defineScenario({
  id: 'parent-row',
  title: "FOR UPDATE on the parent users row serializes, and makes profile edits wait",
  source: 'advisory-lock article §2',
  story: [
    'The user row always exists, so it can be locked: every request first runs SELECT ... FROM users WHERE id = :user FOR UPDATE.',
    'The second request waits there until the first commits, then checks, sees its row and gets 409: held.',
    'But the lock is on the whole user row: an unrelated profile update (UPDATE users SET name = ...) waits behind the requests too.',
    "That collateral wait is the profile session's `waited` column; an advisory key on 'setup_request' would not touch it (§2).",
  ],
  params: {},
  defaultN: 2,
  nRange: [1, 50],
  isolation: () => 'read committed',
  setup: [table, users],
  sessions: (p, n) => {
    const out: Record<string, SessionSpec> = {
      profile: {
        steps: {
          signup: { sql: 'insert into users (id) values (:user) -- before the race: the user exists', run: (sql, ctx) => sql`insert into users (id) values (${ctx.user})` },
          begin: 'begin',
          update: { sql: `update users set name = 'new name' where id = :user`, run: (sql, ctx) => sql`update users set name = 'new name' where id = ${ctx.user}` },
          commit: 'commit',
        },
      },
    }
    for (let i = 1; i <= n; i++) out[`s${i}`] = request
    return out
  },
  lockstep: (p, n) => {
    const s = Array.from({ length: n }, (_, i) => `s${i + 1}`)
    return [
      'profile.signup',
      ...s.map((x) => `${x}.begin`),
      'profile.begin',
      ...s.map((x) => `${x}.lock`),
      'profile.update',
      ...s.map((x) => `${x}.check ${x}.insert ${x}.commit`),
      'profile.commit',
    ].join(' ')
  },
  invariant,
  expect: expectBy({ lockstep: ['serialized'] }),
  checks: [{ label: 'n=4', n: 4 }],
})
