// race explore --jobs: the search's runs handed out to several jobs at once. A job asks for its next run; when none
// is waiting but runs are in flight (an exhaustive search's branches are found by the runs before them), it waits
// until one of them ends. Every wait ends when a run ends or the exploration stops (an error, Ctrl-C): nothing here
// waits on time.

export class Handout<H> {
  private inFlight = 0
  private waiters: (() => void)[] = []
  stopped = false
  constructor(private readonly source: () => H | undefined) {}

  /** The next run, waiting while none is left but some are in flight; undefined when the search is over or stopped. */
  async take(): Promise<H | undefined> {
    for (;;) {
      if (this.stopped) return undefined
      const h = this.source()
      if (h !== undefined) {
        this.inFlight++
        return h
      }
      if (this.inFlight === 0) return undefined
      await this.change()
    }
  }

  /** A run handed out has ended (and its result is in): jobs waiting look again. */
  finish(): void {
    this.inFlight = Math.max(0, this.inFlight - 1)
    this.wake()
  }

  /** Ends the handing out: every job waiting gets undefined, and none gets a run again. */
  stop(): void {
    this.stopped = true
    this.wake()
  }

  /** Resolves when no run is in flight (or the handout stopped). */
  async idle(): Promise<void> {
    while (this.inFlight > 0 && !this.stopped) await this.change()
  }

  private change(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve))
  }

  private wake(): void {
    const w = this.waiters
    this.waiters = []
    for (const f of w) f()
  }
}
