// Cleanup that must run whatever happens: a stack of disposers, run once, in reverse order, on normal
// exit, on errors and on SIGINT/SIGTERM. A second signal while cleaning up forces the synchronous part.
import { Interrupted } from './errors.js'

type Disposer = { name: string; run: () => Promise<void>; force?: () => void }
const stack: Disposer[] = []
let abortController = new AbortController()

/**
 * Aborted on SIGINT/SIGTERM (reason: Interrupted) or by a whole-run timeout (reason: RunError). The CLI runs one
 * command per process; the API (src/api.ts) runs one race after another in its caller's process and starts each
 * with a fresh one (resetLifecycle).
 */
export let abortSignal: AbortSignal = abortController.signal

export function abort(reason: Error): void {
  if (!abortController.signal.aborted) abortController.abort(reason)
}

/** Registers cleanup; `force` is a synchronous last resort (kill a child) used if cleanup itself hangs. */
export function onCleanup(name: string, run: () => Promise<void>, force?: () => void): () => void {
  const d: Disposer = { name, run, force }
  stack.push(d)
  return () => {
    const i = stack.indexOf(d)
    if (i >= 0) stack.splice(i, 1)
  }
}

/** Runs every registered disposer, newest first; a failing one never stops the others. Returns their errors. */
export async function cleanupAll(): Promise<Error[]> {
  return cleanupSince(0)
}

/** How many disposers are registered now: cleanupSince(mark) later runs only those registered after. */
export function cleanupMark(): number {
  return stack.length
}

/** Runs the disposers registered since `mark` (cleanupMark()), newest first, as cleanupAll does. */
export async function cleanupSince(mark: number): Promise<Error[]> {
  const errors: Error[] = []
  while (stack.length > mark) {
    const d = stack.pop()!
    try {
      await d.run()
    } catch (e) {
      errors.push(new Error(`cleanup of ${d.name} failed: ${(e as Error)?.message ?? e}`))
    }
  }
  return errors
}

function forceAll(): void {
  for (const d of stack.splice(0).reverse()) {
    try {
      d.force?.()
    } catch {
      /* last resort: nothing more can be done */
    }
  }
}

let signalled: NodeJS.Signals | undefined
export function installSignalHandlers(): void {
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(sig, () => {
      if (signalled) {
        // Second signal: the user wants out now. Kill what we started, synchronously, and go.
        forceAll()
        process.exit(new Interrupted(signalled).exitCode)
      }
      signalled = sig
      abort(new Interrupted(sig))
    })
  }
}

/** One shared promise that rejects when the run is aborted; race any await that could otherwise hang. */
function abortedPromise(signal: AbortSignal): Promise<never> {
  const p = new Promise<never>((_, reject) => {
    signal.addEventListener('abort', () => reject(signal.reason), { once: true })
  })
  p.catch(() => {}) // observed by whoever races it; never an unhandled rejection by itself
  return p
}
let aborted = abortedPromise(abortSignal)

/** A fresh abort state for the next run in this process (the API's run(), which cleans up what it registered). */
export function resetLifecycle(): void {
  abortController = new AbortController()
  abortSignal = abortController.signal
  aborted = abortedPromise(abortSignal)
  stuck = () => ''
}

export function whenAborted(): Promise<never> {
  return aborted
}

let stuck: () => string = () => ''
/** The engine says what is in flight, so that a whole-run timeout can name the stuck session and step. */
export function setStuckDescriber(f: () => string): void {
  stuck = f
}
export function describeStuck(): string {
  return stuck()
}
