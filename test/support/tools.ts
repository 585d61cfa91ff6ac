// Outside tools some tests need, found on PATH: xmllint (validates JUnit files against test/support/junit.xsd)
// and Chromium (renders the bench page and the --html pages; their DOM is measured), tmux (a real terminal for
// --step), python3 with PyYAML (reads action.yml as a runner would). A test that
// needs one and does not find it is skipped, saying which package provides it.
import { execFileSync, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { findPgbench } from '../../src/bench/pgbench.js'
import { ROOT } from './server.js'

function onPath(bin: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    const p = path.join(dir, bin)
    if (fs.existsSync(p)) return p
  }
  return undefined
}

/** Skip reasons for node:test (false: the tool is there). */
export const NEEDS = {
  xmllint: onPath('xmllint') ? false : 'needs xmllint to validate JUnit XML against a schema (Debian: apt-get install -y libxml2-utils)',
  chromium: onPath('chromium') || onPath('chromium-browser') ? false : "needs Chromium to render the bench page and measure its DOM (Debian: apt-get install -y chromium)",
  tmux: onPath('tmux') ? false : 'needs tmux for a real terminal to drive --step in (Debian: apt-get install -y tmux)',
  pgbouncer: onPath('pgbouncer') || fs.existsSync('/usr/sbin/pgbouncer') ? false : 'needs PgBouncer for --pooler (Debian: apt-get install -y pgbouncer)',
  pgbench: pgbenchMissing(),
  pyyaml: spawnSync('python3', ['-c', 'import yaml'], { encoding: 'utf8' }).status === 0 ? false : 'needs python3 with PyYAML to parse YAML (Debian: apt-get install -y python3-yaml)',
} as const

/** YAML as a GitHub runner reads it (PyYAML's safe loader: no package of race's own parses YAML), as JSON values. */
export function parseYaml(text: string): unknown {
  return JSON.parse(execFileSync('python3', ['-c', 'import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin.read())))'], { input: text, encoding: 'utf8' }))
}

/** Why pgbench cannot be found (race's own search, with its install hint), or false. */
function pgbenchMissing(): string | false {
  try {
    findPgbench()
    return false
  } catch (e) {
    return (e as Error).message
  }
}

/** Validates a JUnit file against the schema race's tests hold it to; returns xmllint's complaint, or ''. */
export function junitProblems(file: string): string {
  const r = spawnSync('xmllint', ['--noout', '--schema', path.join(ROOT, 'test', 'support', 'junit.xsd'), file], { encoding: 'utf8' })
  return r.status === 0 ? '' : `${r.stdout}${r.stderr}`.trim()
}

/**
 * Renders an HTML file in headless Chromium at a window size, with `script` appended (the page itself has none),
 * and returns what the script left as JSON in <pre id="measured">. Chromium runs with a fresh profile, no
 * network services, and is gone when this returns.
 */
export function measureInChromium(htmlFile: string, script: string, size = { width: 1000, height: 900 }): unknown {
  const bin = onPath('chromium') ?? onPath('chromium-browser')!
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-chromium-'))
  try {
    const page = path.join(dir, 'page.html')
    const html = fs.readFileSync(htmlFile, 'utf8')
    const probe = `<pre id="measured"></pre><script>document.getElementById('measured').textContent = JSON.stringify((function () { ${script} })())</script>`
    fs.writeFileSync(page, html.replace('</body>', `${probe}</body>`))
    const out = execFileSync(
      bin,
      [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        `--user-data-dir=${path.join(dir, 'profile')}`,
        `--window-size=${size.width},${size.height}`,
        '--virtual-time-budget=5000',
        '--dump-dom',
        `file://${page}`,
      ],
      { encoding: 'utf8', timeout: 60_000, stdio: ['ignore', 'pipe', 'ignore'] },
    )
    const m = /<pre id="measured">([\s\S]*?)<\/pre>/.exec(out)
    if (!m || !m[1]) throw new Error(`Chromium left no measurement: ${out.slice(0, 300)}`)
    return JSON.parse(m[1].replace(/&quot;/g, '"').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&'))
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
