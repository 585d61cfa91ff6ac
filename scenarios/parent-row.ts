// parent-row (advisory-locks §2): locking the user's existing row (SELECT ... FROM users ... FOR UPDATE)
// before the check serializes check-then-insert: held, the second request waits and gets 409. The price: an
// unrelated profile update of the same user waits behind those locks too (the collateral wait, in `waited`).
import { defineScenario, serialized, clean, type SessionSpec, type Variant } from '../src/scenario.js'
import { EXISTS, checkExists, insertUnlessFound, invariant, table } from './_shared/setup-requests.js'

const users = `create table users (id uuid primary key, name text not null default '')`

const request: SessionSpec = {
  steps: {
    begin: 'begin',
    // The parent row always exists, so it can be locked.
    lock: 'select 1 as locked from users where id = :user for update',
    check: checkExists(),
    insert: insertUnlessFound,
    commit: 'commit',
  },
  racePoint: 'check',
}

const who = (v: Variant) => ({ profile: 'committed', committed: 1, ...(v.n > 1 ? { [`rejected: ${EXISTS}`]: v.n - 1 } : {}) })

export default defineScenario({
  id: 'parent-row',
  title: 'FOR UPDATE on the parent users row serializes, and makes profile edits wait',
  source: { article: 'advisory-locks', section: '2' },
  story: [
    'The user row always exists, so it can be locked: every request first runs SELECT ... FROM users WHERE id = :user FOR UPDATE.',
    'The second request waits there until the first commits, then checks, sees its row and gets 409: held.',
    'But the lock is on the whole user row: an unrelated profile update (UPDATE users SET name = ...) waits behind the requests too.',
    "That collateral wait is the profile session's `waited` column; an advisory key on 'setup_request' would not touch it (§2).",
  ],
  params: {},
  sessionCount: { default: 2, min: 1, max: 50 },
  isolation: 'read committed',
  setup: [table, users],
  sessions: ({ n }) => {
    const out: Record<string, SessionSpec> = {
      profile: {
        steps: {
          signup: 'insert into users (id) values (:user)',
          begin: 'begin',
          update: `update users set name = 'new name' where id = :user`,
          commit: 'commit',
        },
      },
    }
    for (let i = 1; i <= n; i++) out[`s${i}`] = request
    return out
  },
  permutation: ({ n }) => {
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
  invariant: invariant(),
  documented: {
    postgres: {
      lockstep: (v) => serialized('the requests and the profile update wait for the user row, one after another', who(v)),
      serial: (v) => clean('one after another nobody waits', who(v)),
    },
  },
  checks: [{ label: 'n=4', n: 4 }],
  unavailable: { mysql: "not written for InnoDB yet (the article's parent-row FOR UPDATE would behave alike at READ COMMITTED)" },
})
