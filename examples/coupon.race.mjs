// A race of your own as a JavaScript module: a coupon that two sessions redeem at once. Each reads it, and the
// application (rejectIf, the 409 of your code) redeems it only when it was unused. In lockstep both read 0 before
// either writes: redeemed twice. Run it with ./bin/race run examples/coupon.race.mjs (in a project: npx race run
// ./coupon.race.mjs), or from a test with run('./coupon.race.mjs') from 'racelab'.
import { anomaly, clean, defineScenario, replicate, step } from 'racelab'

export default defineScenario({
  id: 'coupon',
  title: 'a coupon redeemed twice',
  story: ['Each session reads the coupon and redeems it when it is unused.'],
  sessionCount: { default: 2, min: 2, max: 2 },
  isolation: 'read committed',
  setup: ['create table coupons (code text primary key, uses int not null)', "insert into coupons values ('X', 0)"],
  sessions: (v) =>
    replicate(v.n, {
      steps: {
        begin: 'begin',
        read: "select uses from coupons where code = 'X'",
        redeem: step("update coupons set uses = uses + 1 where code = 'X'", { rejectIf: ({ prior }) => prior.read.uses > 0 && 'already used' }),
        commit: 'commit',
      },
    }),
  permutation: 's1.begin s2.begin s1.read s2.read s1.redeem s2.redeem s1.commit s2.commit',
  defaultSchedule: 'lockstep',
  invariant: { description: 'redeemed at most once', sql: "select uses <= 1 as held, uses from coupons where code = 'X'" },
  documented: {
    postgres: {
      lockstep: anomaly('both read 0 before either writes, at READ COMMITTED', { s1: 'committed', s2: 'committed' }),
      serial: clean('the second reads 1 and the application says no', { s1: 'committed', s2: 'rejected: already used' }),
    },
  },
})
