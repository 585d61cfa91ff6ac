// How the sessions' steps interleave. Blocking is detected from the control connection, never guessed
// from time: a step is either done, or seen waiting for another session of this run.
import { setTimeout as sleep } from 'node:timers/promises'
import { UsageError } from '../errors.js'
import type { Entry } from '../permutation.js'
import type { Session } from './session.js'
import type { Point } from './points.js'
import type { Chooser, Moment } from './types.js'

/** How often the control connection asks who is blocked while a step runs (isolationtester: 10 ms; a wait shorter than this can go unseen). */
export const POLL_MS = 2

/**
 * How long a step just launched has to end by itself before control is first asked whether it waits
 * (isolationtester's 10 ms). A step that ends sooner costs control nothing; one that waits is seen waiting from
 * control all the same, at most this much later. Asking at once cost every step of a trial a round trip on control,
 * most of them for steps that ended a moment later (issue 41).
 */
export const FIRST_ASK_MS = 10

export interface BlockProbe {
  /** The sessions among `ask` whose step in flight waits for another session (or a backend) of this run. */
  blocked(ask: readonly Session[]): Promise<Set<Session>>
  /** The backends `pid` waits for right now (pg_blocking_pids). */
  blockers?(pid: number): Promise<number[]>
}

/** Called before a step is launched (the engine's --hold gate). */
export type BeforeStep = (s: Session, step: number) => Promise<void>

/**
 * Runs a permutation. Each entry starts when its session is free and runs until it completes or is seen
 * blocked; then the next entry goes. An entry whose session is still waiting is deferred, and the next
 * entry of another session runs instead (isolationtester's rule), so a waiting session resumes where its
 * waiter commits. Entries of a session that has ended (rejected, failed) are skipped.
 */
export async function runPermutation(sessions: readonly Session[], order: readonly Entry[], probe: BlockProbe, before?: BeforeStep): Promise<void> {
  const pending = [...order]
  // Steps whose commit point the permutation names (`s1.ins:commit`): each runs in a transaction race opens for it.
  const split = new Set(order.filter((e) => e.commit || e.suffix !== undefined).map((e) => `${e.session}.${e.step}`))
  // Steps whose later points the permutation names (`s1.a1/2`, `s1.a1:snapshot`): each is split into its points.
  const parts = new Set(order.filter((e) => e.suffix !== undefined).map((e) => `${e.session}.${e.step}`))
  // Steps with a snapshot point named (`s1.a1:snapshot`): only those get one (at READ COMMITTED it is a no-op).
  const snapshots = new Set(order.filter((e) => e.suffix?.endsWith(':snapshot')).map((e) => `${e.session}.${e.step}`))
  for (;;) {
    const idx = pending.findIndex((e) => !sessions[e.session].busy && !sessions[e.session].finished)
    if (idx >= 0) {
      const e = pending.splice(idx, 1)[0]
      const s = sessions[e.session]
      // A point the run does not have (a commit point with nothing to commit: its statement failed, or ran inside a
      // transaction; a later point of a step that failed, or that the run did not split so) is passed.
      if (e.commit && s.openCommit !== e.step) continue
      if (e.part && (s.partStep !== e.step || s.nextPart !== e.suffix)) continue
      if (!e.part && s.nextPart !== undefined) {
        throw new UsageError(`the permutation names ${s.name}.${s.steps[e.step].name}${e.commit ? ':commit' : ''} before ${s.name}.${s.steps[s.partStep!].name}${s.nextPart}, a point of the step before it: name each point of a split step, in order`)
      }
      if (!e.commit && !e.part) await before?.(s, e.step)
      const key = `${e.session}.${e.step}`
      const done = e.commit ? s.startCommit() : e.part ? s.startPart() : s.start(e.step, split.has(key), parts.has(key), snapshots.has(key))
      await settleOrBlocked(s, probe)
      if (e.await) await done
      await settleWoken(sessions, probe)
      continue
    }
    // Drop entries of finished sessions; if nothing is left, wait for the last steps in flight.
    for (let i = pending.length - 1; i >= 0; i--) if (sessions[pending[i].session].finished) pending.splice(i, 1)
    const inFlight = sessions.filter((s) => s.busy).map((s) => s.current!.done)
    if (!inFlight.length) {
      if (pending.length) continue
      return
    }
    // Every remaining entry belongs to a waiting session. If they wait for each other, PostgreSQL's deadlock
    // detector ends it (40P01); if every waiter waits only for sessions that have run all their steps (and
    // still hold a lock, e.g. a session-level advisory lock), nothing can ever move: refuse the permutation.
    await refuseIfStuck(sessions, probe)
    await Promise.race(inFlight)
  }
}

async function refuseIfStuck(sessions: readonly Session[], probe: BlockProbe): Promise<void> {
  const busy = sessions.filter((s) => s.busy)
  if (!probe.blockers || !busy.length || !busy.every((s) => s.current!.blocked)) return
  // Only sessions that had ended before the question was asked can be the reason: a blocker that ends while it is
  // being asked about (its COMMIT in flight) releases its locks.
  const endedBefore = new Set(sessions.filter((s) => s.finished))
  // A pooler's client has a pid only while a backend is lent to it; one that has ended holds none.
  const byPid = new Map(sessions.filter((s) => s.pid > 0).map((s) => [s.pid, s]))
  const stuck: string[] = []
  for (const s of busy) {
    const by = (await probe.blockers(s.pid)).map((p) => byPid.get(p))
    if (!s.busy) return // it moved meanwhile
    if (!by.length || by.some((b) => !b || !endedBefore.has(b))) return
    stuck.push(`${s.name}.${s.current!.name} waits for ${by.map((b) => b!.name).join(', ')}`)
  }
  throw new UsageError(
    `the permutation cannot finish: ${stuck.join('; ')}, which ran all ${stuck.length > 1 ? 'their' : 'its'} steps and still hold${stuck.length > 1 ? '' : 's'} the lock: put the waiting step before the end of the session it waits for`,
  )
}

/**
 * After a step, a session that was waiting and is no longer blocked (the step released its lock) runs until its
 * step completes or blocks again before the next entry starts, as isolationtester does: otherwise the next entry
 * could overtake a wake-up that is a few milliseconds from done.
 */
async function settleWoken(sessions: readonly Session[], probe: BlockProbe): Promise<void> {
  const waiting = sessions.filter((x) => x.busy && x.current!.blocked)
  if (!waiting.length) return
  const still = await probe.blocked(waiting)
  for (const x of waiting) {
    if (still.has(x) || !x.busy) continue
    const done = x.current!.done
    let finished = false
    done.then(() => (finished = true))
    while (!finished) {
      await Promise.race([done, sleep(POLL_MS)])
      if (finished) break
      if ((await unlessDone(probe.blocked([x]), done))?.has(x)) break
    }
  }
}

/**
 * A question to control about a step in flight, or undefined as soon as the step is done (whichever comes first). A
 * question left unanswered is still answered on control, in its turn; its failure (control lost) is the next
 * question's, which every wait races with the connection's loss.
 */
function unlessDone<T>(question: Promise<T>, done: Promise<void>): Promise<T | undefined> {
  question.catch(() => {})
  return Promise.race([question, done.then(() => undefined)])
}

async function settleOrBlocked(s: Session, probe: BlockProbe): Promise<void> {
  const done = s.current!.done
  let finished = false
  done.then(() => (finished = true))
  let timer: NodeJS.Timeout | undefined
  await Promise.race([done, new Promise<void>((r) => (timer = setTimeout(r, FIRST_ASK_MS)))])
  clearTimeout(timer)
  while (!finished) {
    // The step that ends while control is being asked is done with: its answer is not waited for.
    const blocked = await unlessDone(probe.blocked([s]), done)
    if (finished || !blocked) return
    if (blocked.has(s)) {
      s.markBlocked()
      return
    }
    await Promise.race([done, sleep(POLL_MS)])
  }
}

/**
 * Barrier: every session has run its first step (begin); then all run free, their next steps fired in the
 * same tick. A watcher marks steps seen blocked, for the waited column and the timeline.
 */
export async function runBarrier(sessions: readonly Session[], probe: BlockProbe, before?: BeforeStep): Promise<void> {
  const runFree = async (s: Session) => {
    for (let i = 1; i < s.steps.length && !s.finished; i++) {
      await before?.(s, i)
      await s.start(i)
    }
  }
  const all = Promise.all(sessions.filter((s) => !s.finished).map(runFree))
  let done = false
  all.then(
    () => (done = true),
    () => (done = true), // its rejection (e.g. Ctrl-C during --hold) reaches the caller through the race below
  )
  while (!done) {
    await Promise.race([all, sleep(POLL_MS)])
    if (done) break
    const running = sessions.filter((s) => s.busy && !s.current!.blocked)
    if (!running.length) continue
    const blocked = await probe.blocked(running)
    for (const s of running) if (blocked.has(s)) s.markBlocked()
  }
}

/**
 * The ready step a chooser picked: its index in `m.ready`, or its session's name. Anything else ends the run with
 * that error (a replay that no longer fits).
 */
export function pickedOf(m: Moment, pick: number | string): number {
  const at = typeof pick === 'number' ? (Number.isInteger(pick) && pick >= 0 && pick < m.ready.length ? pick : -1) : m.ready.findIndex((r) => r.session === pick)
  if (at < 0) throw new UsageError(`the chooser picked ${JSON.stringify(pick)}, which is not one of the ready sessions (${m.ready.map((x) => x.session).join(', ')})`)
  return at
}

/**
 * A schedule chosen while it runs: each time the sessions settle (every step done or seen waiting), the chooser
 * picks which ready session launches its next step, and that step runs until it completes or is seen blocked, as
 * in runPermutation. A session waiting in a step is never offered: an order that would launch a waiting
 * session's next step cannot happen (isolationtester before PostgreSQL 14 skipped such a permutation as
 * invalid; 14 and later wait out the blocked step until its timeout cancels it). Steps left by a session that
 * ended (rejected, failed) are never launched. Returns the order the steps were launched in.
 */
export async function runChosen(sessions: readonly Session[], choose: Chooser, probe: BlockProbe, before?: BeforeStep): Promise<Entry[]> {
  const next = sessions.map(() => 0)
  const order: Entry[] = []
  const labels: string[] = []
  const label = (s: Session, k: number) => `${s.name}.${s.steps[k].name}`
  // race explore: a statement that would commit by itself runs in a transaction race opens for it, and its commit
  // is the session's next point (Session.openCommit): offered as `s1.ins:commit`.
  const split = choose.split
  const open = (s: Session) => s.openCommit !== undefined
  for (;;) {
    // A step split into points (its statements, a snapshot point: engine/points.ts) offers its later points as the
    // session's next: `s1.a1/2`, as a commit point is offered.
    const part = (s: Session) => s.nextPart !== undefined
    const ready = sessions.filter((s, i) => !s.busy && !s.finished && (open(s) || part(s) || next[i] < s.steps.length))
    if (ready.length) {
      // A step's points as it would be launched now (a snapshot point only where its level keeps a snapshot).
      const plans = new Map<Session, Point | undefined>()
      for (const s of ready) if (!open(s) && !part(s) && split?.(s.index, next[s.index])) plans.set(s, (await s.planFor(next[s.index]))?.points[0])
      const first = (s: Session) => plans.get(s)
      const moment: Moment = {
        ready: ready.map((s) =>
          open(s)
            ? { session: s.name, index: s.index, label: `${label(s, s.openCommit!)}:commit`, sql: 'commit', step: s.openCommit!, part: true }
            : part(s)
              ? { session: s.name, index: s.index, label: `${label(s, s.partStep!)}${s.nextPart}`, sql: s.nextPartSql, step: s.partStep!, part: true }
              : { session: s.name, index: s.index, label: `${label(s, next[s.index])}${first(s)?.suffix ?? ''}`, sql: first(s)?.sql ?? s.steps[next[s.index]].def.sql, step: next[s.index] },
        ),
        blocked: sessions.filter((s) => s.busy && s.current!.blocked).map((s) => ({ session: s.name, index: s.index, label: `${s.name}.${s.current!.name}` })),
        done: sessions.filter((s) => s.finished).map((s) => s.name),
        order: [...labels],
        pids: sessions.map((x) => x.pid),
        errors: sessions.map((x) => x.errors.length),
      }
      const pick = choose(moment)
      const s = ready[pickedOf(moment, typeof pick === 'object' ? await pick : pick)]
      if (open(s)) {
        order.push({ session: s.index, step: s.openCommit!, commit: true })
        labels.push(`${label(s, s.openCommit!)}:commit`)
        s.startCommit()
      } else if (part(s)) {
        order.push({ session: s.index, step: s.partStep!, part: true, suffix: s.nextPart })
        labels.push(`${label(s, s.partStep!)}${s.nextPart}`)
        s.startPart()
      } else {
        const k = next[s.index]++
        const cut = split?.(s.index, k) ?? false
        const suffix = cut ? s.pointsOf(k)?.points[0].suffix : undefined
        order.push({ session: s.index, step: k, ...(suffix !== undefined ? { suffix } : {}) })
        labels.push(`${label(s, k)}${suffix ?? ''}`)
        await before?.(s, k)
        s.start(k, cut, cut)
      }
      await settleOrBlocked(s, probe)
      await settleWoken(sessions, probe)
      continue
    }
    const inFlight = sessions.filter((s) => s.busy).map((s) => s.current!.done)
    if (!inFlight.length) {
      await choose.settled?.({ ready: [], blocked: [], done: sessions.filter((s) => s.finished).map((s) => s.name), order: [...labels], pids: sessions.map((x) => x.pid), errors: sessions.map((x) => x.errors.length) })
      return order
    }
    // Every session left waits: for each other (the deadlock detector ends it), or for one that has run all its steps.
    await refuseIfStuck(sessions, probe)
    await Promise.race(inFlight)
    await settleWoken(sessions, probe)
  }
}
