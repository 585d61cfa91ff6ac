// A unified diff of two transcripts (lines), for `race spec --expected`: common prefix and suffix trimmed,
// the middle aligned by longest common subsequence, shown with three lines of context.

export interface Diff {
  text: string
  /** Lines removed plus lines added. */
  changed: number
}

export function diffLines(a: string, b: string, aName: string, bName: string): Diff {
  const x = a.split('\n')
  const y = b.split('\n')
  let pre = 0
  while (pre < x.length && pre < y.length && x[pre] === y[pre]) pre++
  let suf = 0
  while (suf < x.length - pre && suf < y.length - pre && x[x.length - 1 - suf] === y[y.length - 1 - suf]) suf++
  const xs = x.slice(pre, x.length - suf)
  const ys = y.slice(pre, y.length - suf)
  // ops over the middle: ' ' same, '-' only in a, '+' only in b
  const ops: [string, string][] = []
  if (xs.length * ys.length <= 4_000_000) {
    const n = xs.length
    const m = ys.length
    const L = Array.from({ length: n + 1 }, () => new Int32Array(m + 1))
    for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) L[i][j] = xs[i] === ys[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1])
    let i = 0
    let j = 0
    while (i < n || j < m) {
      if (i < n && j < m && xs[i] === ys[j]) {
        ops.push([' ', xs[i++]])
        j++
      } else if (i < n && (j === m || L[i + 1][j] >= L[i][j + 1])) ops.push(['-', xs[i++]])
      else ops.push(['+', ys[j++]])
    }
  } else {
    for (const l of xs) ops.push(['-', l])
    for (const l of ys) ops.push(['+', l])
  }
  const all: [string, string][] = [...x.slice(Math.max(0, pre - 3), pre).map((l): [string, string] => [' ', l]), ...ops, ...x.slice(x.length - suf, x.length - suf + 3).map((l): [string, string] => [' ', l])]
  const changed = ops.filter((o) => o[0] !== ' ').length
  if (!changed) return { text: '', changed: 0 }
  const start = Math.max(0, pre - 3) + 1
  const lines = [`--- ${aName}`, `+++ ${bName}`, `@@ -${start} +${start} @@`]
  // Collapse long runs of unchanged lines inside the middle.
  let run: string[] = []
  const flush = (end: boolean) => {
    if (run.length > 7) lines.push(...run.slice(0, 3).map((l) => ' ' + l), '@@ ... @@', ...(end ? [] : run.slice(-3).map((l) => ' ' + l)))
    else lines.push(...run.map((l) => ' ' + l))
    run = []
  }
  for (const [op, l] of all) {
    if (op === ' ') run.push(l)
    else {
      flush(false)
      lines.push(op + l)
    }
  }
  flush(true)
  return { text: lines.join('\n') + '\n', changed }
}
