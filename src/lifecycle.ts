// Cleanup that must run whatever happens: a stack of disposers, run once, in reverse order, on normal
// exit, on errors and on SIGINT/SIGTERM. A second signal while cleaning up forces the synchronous part.
import { Interrupted } from './errors.js'

type Disposer = { name: string; run: () => Promise<void>; force?: () => void }
const stack: Disposer[] = []
const abortController = new AbortController()

/** Aborted on SIGINT/SIGTERM (reason: Interrupted) or by a whole-run timeout (reason: RunError). */
export const abortSignal: AbortSignal = abortController.signal

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
  const errors: Error[] = []
  while (stack.length) {
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
const aborted: Promise<never> = new Promise<never>((_, reject) => {
  abortSignal.addEventListener('abort', () => reject(abortSignal.reason), { once: true })
})
aborted.catch(() => {}) // observed by whoever races it; never an unhandled rejection by itself

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
