// The CLI's words for what the engine refuses or could not do (engine/refusals.ts): the engine gives the facts, and
// the command names its own flags (--n, --schedule, --step, ...).
import { plainWords, type Refusal } from '../engine/refusals.js'
import { ownServerRefusal } from '../plan.js'

export function cliWords(r: Refusal): string {
  switch (r.kind) {
    case 'own-server':
      return ownServerRefusal(r.scenario)
    case 'room':
      return `--n ${r.n} needs ${r.n} connections, but the server has room for ${Math.max(0, r.free)} more (max_connections ${r.max}): use --n ${Math.max(1, r.free)} or fewer`
    // The engine's own words, and the flag that helps.
    case 'barrier-shares':
      return `${plainWords(r)}: use --schedule lockstep, serial or a permutation`
    case 'too-many-connections':
      return `${plainWords(r)}: use a smaller --n, or raise the limit`
    case 'shared-backend':
      return `${plainWords(r)}${r.engine === 'postgres' ? ' Say so with --pooled' : ''}`
    case 'application':
      return `${r.scenario} is an application race: ${APPLICATION[r.cannot]}`
  }
}

const APPLICATION = {
  step: '--step is not available for it (its steps are known only as the function sends them)',
  window: "--window has no race point to sleep at; mark one in your code with ctx.point('check') and stand the barrier there (barrier: 'check')",
  hold: '--hold is not available for it',
  pool: "its sessions are the driver's own connections, not a pooler's clients (leave out --pooler/--pooled)",
} as const
