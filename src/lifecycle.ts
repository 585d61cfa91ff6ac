// A run's context: what used to be process-wide (the abort signal, the cleanup stack, what is stuck, the embedded
// server's choices, the colour style) belongs to one run, created for it and passed down. The CLI makes one per
// command; the API (src/api.ts) one per run()/explore(), so that two races in one process never share any of it.
//
// Cleanup that must run whatever happens: a stack of disposers, run once, in reverse order, on normal exit, on
// errors and on SIGINT/SIGTERM. A second signal while cleaning up forces the synchronous part.
import { Interrupted } from './errors.js'
import type { ChalkInstance } from 'chalk'

type Disposer = { name: string; run: () => Promise<void>; force?: () => void }

/** The embedded server a run starts: from the template cache (--no-cache: not), of these --pg versions. */
export interface EmbeddedChoice {
  /** --no-cache: false, a fresh initdb instead of a copy of the cached template. */
  cache: boolean
  /** Every major version --pg asked for (undefined without --pg). */
  pgList?: number[]
  /** The version withLab's embedded server is of now (undefined: 18, the dependency). */
  pg?: number
}

export class RunContext {
  private readonly controller = new AbortController()
  /**
   * Aborted on SIGINT/SIGTERM (reason: Interrupted) or by a whole-run timeout (reason: RunError), or by whoever
   * made the context.
   */
  readonly signal: AbortSignal = this.controller.signal
  private readonly stack: Disposer[] = []
  private readonly aborted: Promise<never>
  private stuck: () => string = () => ''
  /** The embedded server's choices: --no-cache and --pg from the CLI, run()'s pg. */
  readonly embedded: EmbeddedChoice = { cache: true }
  /** How this run's reports are coloured (report/color.ts styleFor); undefined: no colour. */
  style?: ChalkInstance
  /**
   * The command was stopped (--run-timeout, a signal) and has reported what it found by then (race explore): the exit
   * code it chose stands for a timeout; a signal still ends the process with the signal's (cli.ts).
   */
  stopReported = false

  constructor() {
    // One shared promise that rejects when the run is aborted; race any await that could otherwise hang.
    this.aborted = new Promise<never>((_, reject) => {
      this.signal.addEventListener('abort', () => reject(this.signal.reason), { once: true })
    })
    this.aborted.catch(() => {}) // observed by whoever races it; never an unhandled rejection by itself
  }

  abort(reason: Error): void {
    if (!this.signal.aborted) this.controller.abort(reason)
  }

  /** Rejects with the abort's reason once the run is aborted. */
  whenAborted(): Promise<never> {
    return this.aborted
  }

  /** Registers cleanup; `force` is a synchronous last resort (kill a child) used if cleanup itself hangs. */
  onCleanup(name: string, run: () => Promise<void>, force?: () => void): () => void {
    const d: Disposer = { name, run, force }
    this.stack.push(d)
    return () => {
      const i = this.stack.indexOf(d)
      if (i >= 0) this.stack.splice(i, 1)
    }
  }

  /** Runs every registered disposer, newest first; a failing one never stops the others. Returns their errors. */
  async cleanupAll(): Promise<Error[]> {
    const errors: Error[] = []
    while (this.stack.length) {
      const d = this.stack.pop()!
      try {
        await d.run()
      } catch (e) {
        errors.push(new Error(`cleanup of ${d.name} failed: ${(e as Error)?.message ?? e}`))
      }
    }
    return errors
  }

  /** The synchronous last resort of every disposer left (a second Ctrl-C): kill what was started. */
  forceAll(): void {
    for (const d of this.stack.splice(0).reverse()) {
      try {
        d.force?.()
      } catch {
        /* last resort: nothing more can be done */
      }
    }
  }

  /** The engine says what is in flight, so that a whole-run timeout can name the stuck session and step. */
  setStuckDescriber(f: () => string): void {
    this.stuck = f
  }

  describeStuck(): string {
    return this.stuck()
  }
}

/**
 * The CLI's signals: the first SIGINT/SIGTERM/SIGHUP aborts the command's context (its cleanup then runs); a second
 * one, while cleaning up, kills what the context started, synchronously, and exits.
 */
export function installSignalHandlers(ctx: RunContext): void {
  let signalled: NodeJS.Signals | undefined
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(sig, () => {
      if (signalled) {
        // Second signal: the user wants out now. Kill what we started, synchronously, and go.
        ctx.forceAll()
        process.exit(new Interrupted(signalled).exitCode)
      }
      signalled = sig
      ctx.abort(new Interrupted(sig))
    })
  }
}

/** ctx.onCleanup, for code that may run outside any run (a test starting a server): without ctx, the caller cleans up. */
export function onCleanup(ctx: RunContext | undefined, name: string, run: () => Promise<void>, force?: () => void): () => void {
  return ctx ? ctx.onCleanup(name, run, force) : () => {}
}

/**
 * Whether an uncaught exception or unhandled rejection belongs to the code under test (an application race's
 * session, app/contain.ts), which handles it: set by that module as it loads, so that a process that never runs an
 * application race never loads it. False while it is not loaded: no code under test is running.
 */
export type Container = (err: unknown, kind: 'uncaught exception' | 'unhandled rejection') => boolean
let container: Container | undefined

export function setContainer(fn: Container): void {
  container = fn
}

export function contained(err: unknown, kind: 'uncaught exception' | 'unhandled rejection'): boolean {
  return container?.(err, kind) ?? false
}
