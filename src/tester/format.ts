// Text as isolationtester prints it: result sets through libpq's PQprint (aligned, header, '|' between
// columns, numeric-looking columns right-aligned, widths in bytes, "(N rows)" and a blank line), and
// server messages as libpq builds them at its default verbosity (severity, message, a LINE/caret display of
// the statement position, DETAIL, HINT, QUERY, and CONTEXT for errors only). Strings are latin1 (bytes).

/** PQprint(stdout, res, {header, align, fieldSep: '|'}): nothing for a result without columns. res: a PgResult's columns and rows (pgconn.ts, which uses this file). */
export function printResult(res: { fields: readonly string[]; rows: readonly (readonly (string | null)[])[] }): string {
  const n = res.fields.length
  if (!n) return ''
  const width = res.fields.map((f) => f.length)
  const notNum = res.fields.map(() => false)
  for (const row of res.rows) {
    for (let j = 0; j < n; j++) {
      const v = row[j]
      if (v === null || v === '') continue
      if (!notNum[j]) {
        let last = '0'
        for (const ch of v) {
          last = ch
          if (!((ch >= '0' && ch <= '9') || ch === '.' || ch === 'E' || ch === 'e' || ch === ' ' || ch === '-')) {
            notNum[j] = true
            break
          }
        }
        if (v[0] === 'E' || v[0] === 'e' || !(last >= '0' && last <= '9')) notNum[j] = true
      }
      if (v.length > width[j]) width[j] = v.length
    }
  }
  const cell = (s: string, j: number) => (notNum[j] ? s.padEnd(width[j]) : s.padStart(width[j]))
  let out = res.fields.map(cell).join('|') + '\n'
  out += width.map((w) => '-'.repeat(w)).join('+') + '\n'
  for (const row of res.rows) out += row.map((v, j) => cell(v ?? '', j)).join('|') + '\n'
  out += `(${res.rows.length} row${res.rows.length === 1 ? '' : 's'})\n\n`
  return out
}

/**
 * A server message (error or notice) as libpq's default verbosity renders it. `query` is the statement the
 * position refers to (the text of the simple query that was sent), when the message has a position.
 */
export function formatMessage(f: Record<string, string>, isError: boolean, query?: string): string {
  let msg = ''
  let querytext: string | undefined
  let querypos = 0
  if (f.S !== undefined) msg += `${f.S}:  `
  if (f.M !== undefined) msg += f.M
  if (f.P !== undefined) {
    if (query !== undefined) {
      querytext = query
      querypos = Number.parseInt(f.P, 10) || 0
    } else msg += ` at character ${f.P}`
  } else if (f.p !== undefined) {
    if (f.q !== undefined) {
      querytext = f.q
      querypos = Number.parseInt(f.p, 10) || 0
    } else msg += ` at character ${f.p}`
  }
  msg += '\n'
  if (querytext !== undefined && querypos > 0) msg += errorPosition(querytext, querypos)
  if (f.D !== undefined) msg += `DETAIL:  ${f.D}\n`
  if (f.H !== undefined) msg += `HINT:  ${f.H}\n`
  if (f.q !== undefined) msg += `QUERY:  ${f.q}\n`
  if (isError && f.W !== undefined) msg += `CONTEXT:  ${f.W}\n`
  return msg
}

/** Characters of a latin1-held UTF-8 string: [byte offset, byte length, screen width]. */
function chars(s: string): { off: number; len: number; w: number }[] {
  const out: { off: number; len: number; w: number }[] = []
  let i = 0
  while (i < s.length) {
    const b = s.charCodeAt(i)
    const len = b < 0x80 ? 1 : b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1
    let w = 1
    if (len > 1) {
      const cp = Buffer.from(s.slice(i, i + len), 'latin1').toString('utf8').codePointAt(0) ?? 0
      w = isWide(cp) ? 2 : 1
    }
    out.push({ off: i, len, w })
    i += len
  }
  return out
}

function isWide(cp: number): boolean {
  return (
    (cp >= 0x1100 && cp <= 0x115f) ||
    (cp >= 0x2e80 && cp <= 0xa4cf && cp !== 0x303f) ||
    (cp >= 0xac00 && cp <= 0xd7a3) ||
    (cp >= 0xf900 && cp <= 0xfaff) ||
    (cp >= 0xfe30 && cp <= 0xfe6f) ||
    (cp >= 0xff00 && cp <= 0xff60) ||
    (cp >= 0xffe0 && cp <= 0xffe6) ||
    (cp >= 0x1f300 && cp <= 0x1f64f) ||
    (cp >= 0x20000 && cp <= 0x3fffd)
  )
}

/** The "LINE n: ..." line and the caret under the position (1-based, in characters), at most ~60 columns. */
export function errorPosition(query: string, position: number): string {
  const DISPLAY = 60
  const RIGHT = 10
  const loc = position - 1
  if (loc < 0) return ''
  const cs = chars(query)
  const text = query.replace(/\t/g, ' ')
  const scr: number[] = []
  const qoff: number[] = []
  let s = 0
  let line = 1
  let ibeg = 0
  let iend = -1
  let cno = 0
  for (; cno < cs.length; cno++) {
    const c = cs[cno]
    qoff[cno] = c.off
    scr[cno] = s
    const ch = query[c.off]
    if (ch === '\r' || ch === '\n') {
      if (cno < loc) {
        if (ch === '\r' || cno === 0 || query[qoff[cno - 1]] !== '\r') line++
        ibeg = cno + 1
      } else {
        iend = cno
        break
      }
    }
    s += ch === '\t' ? 1 : c.w
  }
  if (iend < 0) {
    iend = cno
    qoff[iend] = query.length
    scr[iend] = s
  }
  if (loc > cno) return ''
  let begTrunc = false
  let endTrunc = false
  if (scr[iend] - scr[ibeg] > DISPLAY) {
    if (scr[ibeg] + DISPLAY >= scr[loc] + RIGHT) {
      while (scr[iend] - scr[ibeg] > DISPLAY) iend--
      endTrunc = true
    } else {
      while (scr[loc] + RIGHT < scr[iend]) {
        iend--
        endTrunc = true
      }
      while (scr[iend] - scr[ibeg] > DISPLAY) {
        ibeg++
        begTrunc = true
      }
    }
  }
  const prefix = `LINE ${line}: ${begTrunc ? '...' : ''}`
  let out = prefix + text.slice(qoff[ibeg], qoff[iend]) + (endTrunc ? '...' : '') + '\n'
  out += ' '.repeat(prefix.length + scr[loc] - scr[ibeg]) + '^\n'
  return out
}
