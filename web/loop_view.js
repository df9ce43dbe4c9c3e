// loop_view.js - the recall loop drawn live, from the engine's events as the turn runs: the same
// picture as `recall trace-svg` (one panel per turn: gate scores against the threshold, fires,
// the spans whose context carried recalled blocks, where the feed ends; a strip of the candidate
// blocks each fire scored), plus the context as the last rebuild laid it out: [BOS][gist]
// [recalled blocks][window], and the text of the blocks each fire brought back. Element classes
// are trace-svg's (gate, gate fired, threshold, fire, inj, feed-end, cand), so the page's test can
// count them.
const NS = 'http://www.w3.org/2000/svg';
const W = 560, LEFT = 44, RIGHT = 10, CHART_H = 130, ROW_H = 16;

function el(tag, attrs = {}, parent = null, text = null) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== null) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}

export class LoopView {
  constructor(root) {
    this.root = root;
    this.turns = [];
    this.threshold = NaN;
    this.geometry = null;
  }

  setLoop(loop, arm) {
    this.threshold = loop.threshold;
    this.geometry = loop;
    this.arm = arm;
  }

  clear() {
    this.turns = [];
    this.root.replaceChildren();
  }

  startTurn(index, user, feedLen) {
    const t = { index, user, feedLen, gates: [], fires: [], rebuilds: [], nReply: 0, done: false };
    this.turns.push(t);
    t.box = document.createElement('section');
    t.box.className = 'turn-view';
    t.box.dataset.turn = String(index);
    this.root.prepend(t.box); // the newest turn on top
    this.draw(t);
    return t;
  }

  current() {
    return this.turns[this.turns.length - 1];
  }

  event(ev) {
    const t = this.current();
    if (!t) return;
    if (ev.kind === 'gate') t.gates.push([ev.c0, ev.score, ev.fired]);
    else if (ev.kind === 'fire') t.fires.push({ c0: ev.c0, score: ev.score, nCand: ev.nCand, injected: ev.injected, n: ev.ids ? ev.ids.length : 0, text: ev.text || '' });
    else if (ev.kind === 'rebuild') t.rebuilds.push({ c0: ev.c0, hasSp: ev.hasSp, injLen: ev.injLen, windowLen: ev.windowLen, reused: ev.reused });
    this.draw(t);
  }

  token(n) {
    const t = this.current();
    if (!t) return;
    t.nReply = n;
    if (n % 8 === 0) this.draw(t); // the x range grows with the reply; redraw now and then
  }

  finish() {
    const t = this.current();
    if (!t) return;
    t.done = true;
    this.draw(t);
  }

  draw(t) {
    const box = t.box;
    box.replaceChildren();
    const h = document.createElement('h3');
    const fired = t.fires.filter((f) => f.injected).length;
    h.textContent = `turn ${t.index + 1} · ${this.arm} · feed ${t.feedLen} tokens, reply ${t.nReply}${t.done ? '' : '…'} · ${t.gates.length} gate checks, ${fired} fire${fired === 1 ? '' : 's'}`;
    box.appendChild(h);
    box.appendChild(this.context(t));
    box.appendChild(this.chart(t));
    for (const f of t.fires.filter((f) => f.injected).slice(-2)) {
      const p = document.createElement('p');
      p.className = 'recalled';
      p.textContent = `recalled at c0 ${f.c0} (${f.n} tokens): ${f.text}`;
      box.appendChild(p);
    }
  }

  // the context of the last rebuild, to scale: BOS, the gist, the recalled blocks, the window
  context(t) {
    const svg = el('svg', { class: 'context', width: W, height: 34, viewBox: `0 0 ${W} 34` });
    const r = t.rebuilds[t.rebuilds.length - 1];
    if (!r) {
      el('text', { x: 4, y: 20, fill: '#777' }, svg, 'context: no rebuild yet (the conversation fits the window)');
      return svg;
    }
    const gist = r.hasSp ? this.geometry?.gistLen || 0 : 0;
    const parts = [
      ['bos', 1, 'BOS'],
      ['gist', r.hasSp ? Math.max(gist, 8) : 0, r.hasSp ? 'gist' : ''],
      ['injected', r.injLen, r.injLen ? `recalled ${r.injLen}` : ''],
      ['window', r.windowLen, `window ${r.windowLen}`],
    ];
    const total = parts.reduce((a, p) => a + p[1], 0) || 1;
    let x = LEFT;
    const w = W - LEFT - RIGHT;
    el('text', { x: 2, y: 20, 'font-size': 10, fill: '#555' }, svg, `c0 ${r.c0}`);
    for (const [cls, n, label] of parts) {
      if (!n) continue;
      const pw = Math.max(3, (w * n) / total);
      el('rect', { class: `ctx ${cls}`, x, y: 6, width: pw, height: 20 }, svg);
      if (pw > 40) el('text', { x: x + 4, y: 20, 'font-size': 10 }, svg, label);
      x += pw;
    }
    return svg;
  }

  chart(t) {
    const nFires = t.fires.length;
    const H = CHART_H + 30 + nFires * ROW_H;
    const svg = el('svg', { class: 'chart', width: W, height: H, viewBox: `0 0 ${W} ${H}` });
    const c0s = [...t.gates.map((g) => g[0]), ...t.rebuilds.map((r) => r.c0), ...t.fires.map((f) => f.c0)];
    const lo = Math.min(t.feedLen - 16, ...c0s);
    const hi = Math.max(t.feedLen + Math.max(t.nReply, 16), ...c0s);
    const scores = t.gates.map((g) => g[1]).filter(Number.isFinite);
    const thr = this.threshold;
    let ylo = Math.min(0, ...scores, Number.isFinite(thr) ? thr : 0);
    let yhi = Math.max(1, ...scores, Number.isFinite(thr) ? thr : 1);
    const pad = (yhi - ylo) * 0.08;
    ylo -= pad;
    yhi += pad;
    const cw = W - LEFT - RIGHT, cy0 = 8, ch = CHART_H - 16;
    const fx = (c0) => LEFT + ((c0 - lo) / (hi - lo || 1)) * cw;
    const fy = (s) => cy0 + ch - ((s - ylo) / (yhi - ylo || 1)) * ch;
    // the spans whose context carried recalled blocks: from a rebuild with injected ids to the next
    t.rebuilds.forEach((r, i) => {
      if (!r.injLen) return;
      const end = i + 1 < t.rebuilds.length ? t.rebuilds[i + 1].c0 : Math.max(r.c0, t.feedLen + t.nReply);
      el('rect', { class: 'inj', x: fx(r.c0), y: cy0, width: Math.max(1, fx(end) - fx(r.c0)), height: ch }, svg);
    });
    el('line', { class: 'axis', x1: LEFT, y1: cy0 + ch, x2: LEFT + cw, y2: cy0 + ch }, svg);
    el('line', { class: 'axis', x1: LEFT, y1: cy0, x2: LEFT, y2: cy0 + ch }, svg);
    for (const v of [ylo + pad, yhi - pad]) el('text', { x: LEFT - 4, y: fy(v) + 3, 'text-anchor': 'end', 'font-size': 9, fill: '#555' }, svg, v.toFixed(1));
    for (const r of t.rebuilds) el('line', { class: 'axis rebuild', x1: fx(r.c0), y1: cy0 + ch, x2: fx(r.c0), y2: cy0 + ch + 4 }, svg);
    el('text', { x: LEFT + cw, y: cy0 + ch + 14, 'text-anchor': 'end', 'font-size': 9, fill: '#555' }, svg, `c0 ${lo}…${hi} (tokens)`);
    const fe = el('line', { class: 'feed-end', x1: fx(t.feedLen), y1: cy0, x2: fx(t.feedLen), y2: cy0 + ch }, svg);
    el('title', {}, fe, `feed ends at ${t.feedLen}: the reply starts`);
    if (Number.isFinite(thr)) {
      const l = el('line', { class: 'threshold', x1: LEFT, y1: fy(thr), x2: LEFT + cw, y2: fy(thr) }, svg);
      el('title', {}, l, `threshold ${thr.toFixed(4)}`);
    }
    for (const f of t.fires) {
      const l = el('line', { class: 'fire', x1: fx(f.c0), y1: cy0, x2: fx(f.c0), y2: cy0 + ch }, svg);
      el('title', {}, l, `fire at c0 ${f.c0}, score ${f.score.toFixed(4)}${f.injected ? '' : ' (held back)'}`);
    }
    if (t.gates.length > 1) el('polyline', { class: 'score-line', points: t.gates.filter((g) => Number.isFinite(g[1])).map((g) => `${fx(g[0]).toFixed(1)},${fy(g[1]).toFixed(1)}`).join(' ') }, svg);
    for (const [c0, s, fired] of t.gates) {
      if (!Number.isFinite(s)) continue;
      const c = el('circle', { class: fired ? 'gate fired' : 'gate', cx: fx(c0), cy: fy(s), r: 3.2 }, svg);
      el('title', {}, c, `c0 ${c0}: score ${s.toFixed(4)}${fired ? ' > threshold: fire' : ''}`);
    }
    // one row per fire: the candidate blocks it scored (oldest first)
    t.fires.forEach((f, i) => {
      const y = CHART_H + 8 + i * ROW_H;
      el('text', { x: 2, y: y + 11, 'font-size': 9, fill: '#d62728' }, svg, `c0 ${f.c0}`);
      const bw = Math.min(18, cw / Math.max(1, f.nCand));
      for (let b = 0; b < f.nCand; b++) el('rect', { class: 'cand', x: LEFT + b * bw, y, width: bw - 2, height: ROW_H - 4 }, svg);
      el('text', { x: LEFT + f.nCand * bw + 4, y: y + 11, 'font-size': 9, fill: '#555' }, svg, f.injected ? `${f.nCand} blocks scored, ${f.n} tokens back` : 'held back');
    });
    return svg;
  }
}
