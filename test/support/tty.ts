// A real terminal for a test: race runs in a tmux pane (its own tmux server, on its own socket), the test types
// keys with send-keys and reads the screen with capture-pane. Waiting is by looking at the screen, bounded.
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { BIN } from './server.js'

let serial = 0

export class Tty {
  private readonly socket = `race-test-${process.pid}-${++serial}`
  private readonly script: string

  /** Starts `race <args>` in a width x height pane; env is added to a clean environment (no colour, no DATABASE_URL). */
  constructor(args: string[], o: { env?: Record<string, string>; width?: number; height?: number } = {}) {
    const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`
    const env = { NO_COLOR: '1', ...(o.env ?? {}) }
    this.script = path.join(os.tmpdir(), `${this.socket}.sh`)
    // The shell stays after race exits, so the test can read the last screen and the exit code.
    fs.writeFileSync(
      this.script,
      [
        'unset DATABASE_URL PGHOST PGDATABASE PGUSER PGPORT PGPASSWORD COLUMNS GITHUB_ACTIONS',
        ...Object.entries(env).map(([k, v]) => `export ${k}=${q(v)}`),
        `${q(process.execPath)} ${q(BIN)} ${args.map(q).join(' ')}`,
        'echo "EXIT:$?"',
        'exec sleep 600',
      ].join('\n'),
    )
    this.tmux('-f', '/dev/null', 'new-session', '-d', '-s', 'race', '-x', String(o.width ?? 100), '-y', String(o.height ?? 45), 'sh', this.script)
  }

  private tmux(...args: string[]): string {
    return execFileSync('tmux', ['-L', this.socket, ...args], { encoding: 'utf8', timeout: 10_000 })
  }

  /** What the terminal shows now (trailing spaces trimmed). */
  screen(): string {
    return this.tmux('capture-pane', '-p', '-t', 'race')
      .split('\n')
      .map((l) => l.trimEnd())
      .join('\n')
      .trimEnd()
  }

  /** Waits (looking at the screen every 50 ms, at most `ms`) until it matches; returns the screen. */
  async waitFor(re: RegExp, ms = 30_000): Promise<string> {
    const t0 = Date.now()
    for (;;) {
      const s = this.screen()
      if (re.test(s)) return s
      if (Date.now() - t0 > ms) throw new Error(`the terminal never showed ${re}; it shows:\n${s}`)
      await sleep(50)
    }
  }

  /** Types a key: 'Enter', 'Space', 'C-c', or a character. */
  key(k: string): void {
    this.tmux('send-keys', '-t', 'race', k)
  }

  /** The pid of race (the shell's child), while it runs. */
  racePid(): number {
    const sh = Number(this.tmux('display-message', '-p', '-t', 'race', '#{pane_pid}').trim())
    const kids = fs.readFileSync(`/proc/${sh}/task/${sh}/children`, 'utf8').trim().split(/\s+/).map(Number)
    return kids[0]
  }

  /** race's exit code, once the screen shows it. */
  async exitCode(ms = 30_000): Promise<number> {
    const s = await this.waitFor(/EXIT:\d+/, ms)
    return Number(/EXIT:(\d+)/.exec(s)![1])
  }

  close(): void {
    try {
      this.tmux('kill-server')
    } catch {
      /* already gone */
    }
    fs.rmSync(this.script, { force: true })
  }
}
