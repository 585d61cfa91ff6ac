// The two kinds of error a user may see. Everything else is a bug in race and is reported as one.

/** Bad input: one line naming what was wrong and how to fix it; exit 2. */
export class UsageError extends Error {
  readonly exitCode = 2
}

/** The run could not be carried out or decided (server unreachable, timeout, lost control); exit 3. */
export class RunError extends Error {
  readonly exitCode = 3
}

/** Ctrl-C or SIGTERM: cleanup ran; exit 128 + signal number. */
export class Interrupted extends Error {
  /** What cleanup could not undo (e.g. a schema on a server that went away), for the user to finish. */
  leftover?: string
  constructor(readonly signal: NodeJS.Signals) {
    super(`interrupted by ${signal}`)
  }
  get exitCode(): number {
    return this.signal === 'SIGINT' ? 130 : this.signal === 'SIGTERM' ? 143 : this.signal === 'SIGPIPE' ? 141 : 129
  }
}
