// What a search found that stands whatever else it did not decide: a violation, and the code under test failing
// (judge/failure.ts). Both are facts a replay line reproduces, so they decide the exit code before anything left
// undecided does; and a search that was stopped (--run-timeout, Ctrl-C, SIGTERM) keeps them.
import type { RunContext } from '../lifecycle.js'
import { Interrupted, RunError } from '../errors.js'

/** How a search was stopped before its end: the command's --run-timeout, or a signal. */
export type Stopped = 'run-timeout' | 'SIGINT' | 'SIGTERM' | 'SIGHUP'

/**
 * Why the run's context was aborted, when it is a stop whose findings are worth keeping: the whole-run timeout (the
 * only RunError a context is aborted with, run/lab.ts) or a signal from the user. Anything else (a closed stdout,
 * SIGPIPE) is not.
 */
export function stopOf(ctx: RunContext): Stopped | undefined {
  if (!ctx.signal.aborted) return undefined
  const r = ctx.signal.reason
  if (r instanceof RunError) return 'run-timeout'
  if (r instanceof Interrupted && (r.signal === 'SIGINT' || r.signal === 'SIGTERM' || r.signal === 'SIGHUP')) return r.signal
  return undefined
}

/**
 * The exit code of a search from what it found. `base`: what the expectation alone gives (judge's exitCode, or 3
 * for a search that did not run everything it meant to). The code failing is a deviation whatever was expected,
 * unless a violation was expected and found; a violation fails --expect held; a stopped search that found neither
 * decided nothing (3), unless it found the violation --expect violated asked for.
 */
export function exitFromFindings(base: 0 | 1 | 3, o: { expect: 'held' | 'violated' | undefined; violating: number; failed: number; stopped: boolean }): 0 | 1 | 3 {
  if (o.expect === 'violated' && o.violating > 0) return 0
  if (o.failed > 0) return 1
  if (o.expect === 'held' && o.violating > 0) return 1
  if (o.stopped) return 3
  return base
}
