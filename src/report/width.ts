// How wide the output may be, and text that fits it: measuring, wrapping and cutting strings that carry colour
// codes without losing the colour. Pure (apart from reading the terminal's width).

/** The width to fit: COLUMNS when set, else the terminal's width, else 80 (a pipe, a CI log). */
export function columns(stream: { isTTY?: boolean; columns?: number } = process.stdout): number {
  const env = Number.parseInt(process.env.COLUMNS ?? '', 10)
  if (env > 0) return env
  return stream.isTTY && stream.columns ? stream.columns : 80
}

// eslint-disable-next-line no-control-regex
const SGR = /\u001b\[[0-9;]*m/g
// eslint-disable-next-line no-control-regex
const SGR_AT = /^\u001b\[[0-9;]*m/

export function strip(s: string): string {
  return s.replace(SGR, '')
}

/** East Asian wide and fullwidth characters and emoji take two columns. */
function cellsOf(cp: number): number {
  if (cp < 0x1100) return 1
  if (
    cp <= 0x115f ||
    (cp >= 0x2e80 && cp <= 0xa4cf && cp !== 0x303f) ||
    (cp >= 0xac00 && cp <= 0xd7a3) ||
    (cp >= 0xf900 && cp <= 0xfaff) ||
    (cp >= 0xfe30 && cp <= 0xfe4f) ||
    (cp >= 0xff00 && cp <= 0xff60) ||
    (cp >= 0xffe0 && cp <= 0xffe6) ||
    (cp >= 0x1f300 && cp <= 0x1f64f) ||
    (cp >= 0x1f900 && cp <= 0x1f9ff) ||
    (cp >= 0x20000 && cp <= 0x3fffd)
  ) {
    return 2
  }
  return 1
}

/** Characters below U+1100 take one column each and are one UTF-16 unit each: such a string's width is its length. */
const NARROW = /^[\u0000-\u10ff]*$/

/** Columns a string takes on screen: colour codes take none, wide characters two. */
export function width(s: string): number {
  const t = s.includes('\u001b') ? strip(s) : s
  if (NARROW.test(t)) return t.length
  let n = 0
  for (const ch of t) n += cellsOf(ch.codePointAt(0)!)
  return n
}

/** The widest line of a (possibly multi-line) string. */
export function widest(s: string): number {
  return Math.max(0, ...s.split('\n').map(width))
}

type Token = { code: string } | { ch: string; w: number }

function tokens(s: string): Token[] {
  const out: Token[] = []
  let i = 0
  while (i < s.length) {
    const m = s[i] === '\u001b' ? SGR_AT.exec(s.slice(i)) : null
    if (m) {
      out.push({ code: m[0] })
      i += m[0].length
      continue
    }
    const ch = String.fromCodePoint(s.codePointAt(i)!)
    out.push({ ch, w: cellsOf(ch.codePointAt(0)!) })
    i += ch.length
  }
  return out
}

/** Which open styles a code closes (chalk closes each style with its own code). */
const CLOSES: Record<string, (open: number) => boolean> = {
  '0': () => true,
  '22': (o) => o === 1 || o === 2,
  '23': (o) => o === 3,
  '24': (o) => o === 4,
  '27': (o) => o === 7,
  '29': (o) => o === 9,
  '39': (o) => (o >= 30 && o <= 38) || (o >= 90 && o <= 97),
  '49': (o) => (o >= 40 && o <= 48) || (o >= 100 && o <= 107),
}

/** The styles open after `code`, given those open before it. */
function applyCode(open: string[], code: string): string[] {
  const n = code.slice(2, -1).split(';')[0] || '0'
  const close = CLOSES[n]
  if (close) return open.filter((o) => !close(Number(o.slice(2, -1).split(';')[0])))
  return [...open, code]
}

const RESET = '\u001b[0m'

/**
 * Cuts a string to `w` columns, ending it with `…` when something was cut. Colour codes are kept (the cut part's
 * own styles are closed), so a long red cell stays red.
 */
export function truncate(s: string, w: number, ellipsis = '…'): string {
  if (width(s) <= w) return s
  const room = Math.max(0, w - width(ellipsis))
  let out = ''
  let used = 0
  let open: string[] = []
  for (const t of tokens(s)) {
    if ('code' in t) {
      open = applyCode(open, t.code)
      out += t.code
      continue
    }
    if (used + t.w > room) break
    out += t.ch
    used += t.w
  }
  return out + ellipsis + (open.length ? RESET : '')
}

/** Pads to `w` columns (colour-aware); never cuts. */
export function pad(s: string, w: number): string {
  return s + ' '.repeat(Math.max(0, w - width(s)))
}

/**
 * Wraps a string into lines of at most `w` columns, at spaces; a word longer than a line is broken (nothing is
 * ever cut). Each line carries the colours open at its start and closes them at its end, so a wrapped red cell is
 * red on every line. Existing line breaks are kept. `rest` is the width of every line after the first.
 */
export function wrap(s: string, w: number, rest = w): string[] {
  const out: string[] = []
  let open: string[] = []
  const room = () => Math.max(1, out.length ? rest : w)
  for (const para of s.split('\n')) {
    if (!open.length && !para.includes('\u001b') && NARROW.test(para)) {
      wrapPlain(para, out, room)
      continue
    }
    // Words, each a list of tokens, and the spaces before each (kept inside a line, dropped at a break).
    // Colour codes stick to the word they precede.
    const words: { gap: number; toks: Token[] }[] = [{ gap: 0, toks: [] }]
    let gap = 0
    for (const t of tokens(para)) {
      if ('ch' in t && t.ch === ' ') {
        gap++
        continue
      }
      if (gap) {
        if (words.length === 1 && !words[0].toks.some((x) => 'ch' in x)) words[0].gap += gap
        else words.push({ gap, toks: [] })
        gap = 0
      }
      words[words.length - 1].toks.push(t)
    }
    let line = open.join('')
    let used = 0
    const flush = () => {
      out.push(line + (open.length ? RESET : ''))
      line = open.join('')
      used = 0
    }
    words.forEach((word, k) => {
      const ww = word.toks.reduce((a, t) => a + ('w' in t ? t.w : 0), 0)
      if (k > 0 && used > 0 && used + word.gap + ww > room()) flush()
      else if (word.gap) {
        line += ' '.repeat(word.gap)
        used += word.gap
      }
      for (const t of word.toks) {
        if ('code' in t) {
          open = applyCode(open, t.code)
          line += t.code
          continue
        }
        if (used + t.w > room() && used > 0) flush()
        line += t.ch
        used += t.w
      }
    })
    out.push(line + (open.length ? RESET : ''))
  }
  return out
}

/**
 * wrap() of a paragraph of one-column characters and no colour codes (the common case), on strings instead of
 * tokens: the same words (the spaces before each; spaces at the end dropped), the same breaks.
 */
function wrapPlain(para: string, out: string[], room: () => number): void {
  let line = ''
  let used = 0
  const flush = () => {
    out.push(line)
    line = ''
    used = 0
  }
  let k = 0
  for (const m of para.matchAll(/( *)([^ ]+)/g)) {
    const gap = m[1].length
    const word = m[2]
    if (k++ > 0 && used > 0 && used + gap + word.length > room()) flush()
    else if (gap) {
      line += ' '.repeat(gap)
      used += gap
    }
    if (used + word.length <= room()) {
      line += word
      used += word.length
      continue
    }
    // Longer than what is left: broken where the line is full.
    for (const ch of word) {
      if (used + 1 > room() && used > 0) flush()
      line += ch
      used += 1
    }
  }
  out.push(line)
}

/**
 * One logical line made to fit: the first line as it is, the rest indented by `hangBy` columns (a hanging
 * indent, e.g. under the text after a label). Breaks at spaces; never cuts.
 */
export function hang(line: string, w: number, hangBy: number): string[] {
  if (width(line) <= w) return [line]
  const by = Math.min(hangBy, Math.max(0, w - 20))
  const lines = wrap(line, w, w - by)
  return lines.map((l, i) => (i ? ' '.repeat(by) + l : l))
}

/**
 * Fits every line of a block: a line that starts with a label and two spaces ("invariant  ...") continues under
 * the text after the label; any other line under its own indentation plus `extra`.
 */
export function fitLines(lines: readonly string[], w: number, extra = 2): string[] {
  return lines
    .flatMap((l) => l.split('\n'))
    .flatMap((l) => {
      const plain = strip(l)
      const label = /^( *\S+ {2,})\S/.exec(plain)
      return hang(l, w, label ? label[1].length : /^ */.exec(plain)![0].length + extra)
    })
}

/** Parts joined by `sep`, broken into several lines (continuations indented by `indent`) when they do not fit. */
export function joinFit(parts: readonly string[], sep: string, w: number, indent = 0): string[] {
  const out: string[] = []
  let line = ''
  for (const p of parts.filter(Boolean)) {
    if (!line) line = (out.length ? ' '.repeat(indent) : '') + p
    else if (width(line) + width(sep) + width(p) <= w) line += sep + p
    else {
      out.push(line)
      line = ' '.repeat(indent) + p
    }
  }
  if (line) out.push(line)
  return out.flatMap((l) => hang(l, w, indent + 2))
}
