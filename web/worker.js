// worker.js - the engine's thread in the page: recall.wasm runs here, so that the page stays
// responsive and repaints while a turn computes, and every loop event is posted to the page the
// moment the engine calls back (the token stream and the live loop picture are built from them).
// Messages in: init, open, arm, restore, reset, send, replay; out: ready, blobError, restored,
// ev, token, done, turnError, replayDone, fatal.
import { Recall, RecallError, relaxedMadd } from './recall.js';

let engine = null; // Recall (the module instance)
let model = null; // the open blob
let loop = null; // the loop on the chosen arm
let arm = 'RC_bge';
let blobName = '';
let history = new Int32Array(0); // the conversation's ids, as `recall chat` keeps them

const post = (m) => self.postMessage(m);
const concat = (a, b) => {
  const r = new Int32Array(a.length + b.length);
  r.set(a);
  r.set(b, a.length);
  return r;
};

function describe() {
  return {
    type: 'ready',
    name: blobName,
    arm,
    info: { vocab: model.vocab, maxPos: model.maxPos, hidden: model.hidden, layers: model.layers },
    module: module.file,
    probe: module.probe,
    kernels: engine.kernels(),
    loop: { window: loop.window, block: loop.block, chunk: loop.chunk, k: loop.k, turnCap: loop.turnCap, threshold: loop.threshold },
  };
}

function openLoop() {
  if (loop) engine.loopClose(loop);
  loop = null;
  loop = engine.loopOpen(model, arm);
}

// A blob the user picked: opened (checksums verified) before the current one is let go, so a bad
// file leaves the page as it was and says why.
function openBlob(name, bytes) {
  let m;
  try {
    m = engine.open(bytes);
  } catch (e) {
    post({ type: 'blobError', name, msg: e instanceof RecallError ? e.message : String(e) });
    return false;
  }
  if (loop) engine.loopClose(loop);
  loop = null;
  if (model) engine.close(model);
  model = m;
  blobName = name;
  history = new Int32Array(0);
  // the CLI (replay) reads the blob from the in-memory file system
  engine.wasi.files.set('/w/world.blob', bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes));
  try {
    openLoop();
  } catch (e) {
    post({ type: 'blobError', name, msg: e.message });
    return false;
  }
  post(describe());
  return true;
}

// Decoded reply so far; a trailing U+FFFD is held back (its other bytes may still come), as
// `recall chat` prints.
function replyText(ids, final) {
  let t = engine.detokenize(model, ids, false);
  if (!final && t.endsWith('\uFFFD')) t = t.slice(0, -1);
  return t;
}

// The user's text of a chat segment: its decoding without the template around it (the template
// is found by decoding a segment around a marker character, so no template string is written here).
function userText(seg, withEos) {
  const [pre, post] = engine.detokenize(model, engine.segment(model, withEos, '\u0001'), false).split('\u0001');
  const t = engine.detokenize(model, seg, false);
  return t.startsWith(pre) && t.endsWith(post) ? t.slice(pre.length, t.length - post.length) : t;
}

function send(text) {
  const seg = engine.segment(model, history.length > 0, text);
  const feed = concat(history, seg);
  const reply = [];
  const t0 = performance.now();
  let first = null;
  post({ type: 'turnStart', feedLen: feed.length, user: text });
  const onEvent = (ev) => {
    if (ev.kind === 'token') {
      reply.push(ev.token);
      if (first === null) first = performance.now() - t0;
      post({ type: 'token', id: ev.token, n: reply.length, text: replyText(Int32Array.from(reply), false) });
    } else {
      if (ev.ids) ev.text = engine.detokenize(model, ev.ids, false);
      post({ type: 'ev', ev });
    }
    return false;
  };
  let ids;
  try {
    ids = engine.turn(loop, feed, onEvent);
  } catch (e) {
    post({ type: 'turnError', msg: e.message });
    return;
  }
  history = concat(feed, ids);
  post({
    type: 'done',
    seg: Array.from(seg),
    reply: Array.from(ids),
    text: replyText(ids, true),
    ms: performance.now() - t0,
    firstTokenMs: first,
    historyLen: history.length,
  });
}

// Which module: recall-relaxed.wasm where the engine's relaxed-simd multiply-add is fused (its
// kernels then use it, after the module's own proof), else recall.wasm (the exact fmaf emulated in
// double: the same bits). opts.wasm = 'exact' forces recall.wasm; opts.madd (RECALL_WASM_MADD in
// the module: 'off', or 'unfused' to simulate an engine that does not fuse) loads the relaxed one
// where the engine has relaxed-simd. The page takes both from its address (?wasm=exact, ?madd=...).
function pickModule(opts) {
  if (opts.wasm === 'exact') return { file: 'recall.wasm', probe: 'not asked (?wasm=exact)' };
  const probe = relaxedMadd();
  const relaxed = probe === 'fused' || (probe !== 'unsupported' && opts.madd);
  return { file: relaxed ? 'recall-relaxed.wasm' : 'recall.wasm', probe };
}

let module = null; // {file, probe}

async function init(base, opts = {}) {
  module = pickModule(opts);
  const [wasm, blob, bench] = await Promise.all(
    [module.file, 'world.blob', 'demo_bench.json'].map((f) =>
      fetch(new URL(f, base)).then((r) => {
        if (!r.ok) throw new Error(`${f}: HTTP ${r.status}`);
        return r.arrayBuffer();
      }),
    ),
  );
  const env = opts.madd && module.file === 'recall-relaxed.wasm' ? { RECALL_WASM_MADD: opts.madd } : {};
  engine = await Recall.load(wasm, { files: new Map([['/w/bench.json', new Uint8Array(bench)]]), env });
  openBlob('world.blob (the demo world)', new Uint8Array(blob));
}

self.onmessage = async ({ data: m }) => {
  try {
    if (m.op === 'init') await init(m.base, m.opts);
    else if (m.op === 'open') openBlob(m.name, new Uint8Array(m.bytes));
    else if (m.op === 'arm') {
      arm = m.arm;
      openLoop();
      post(describe());
    } else if (m.op === 'reset') history = new Int32Array(0);
    else if (m.op === 'restore') {
      // the session kept by the page: ids only; the text is the blob's decoding of them
      history = Int32Array.from(m.turns.flatMap((t) => [...t.seg, ...t.reply]));
      post({
        type: 'restored',
        turns: m.turns.map((t, i) => ({ user: userText(Int32Array.from(t.seg), i > 0), reply: replyText(Int32Array.from(t.reply), true) })),
      });
    } else if (m.op === 'send') send(m.text);
    else if (m.op === 'replay') {
      // `recall replay` of the bundled dialogue inside the module, as natively (docs/WEB.md)
      const t0 = performance.now();
      const args = ['replay', '/w/world.blob', '--bench', '/w/bench.json', '--problem', String(m.problem), '--trace', '/w/trace.json'];
      if (m.simd) args.push('--simd', m.simd);
      if (m.arm) args.push('--arm', m.arm);
      engine.wasi.files.delete('/w/trace.json');
      const r = engine.cli(args);
      const trace = engine.wasi.files.get('/w/trace.json');
      post({ type: 'replayDone', rc: r.rc, stderr: r.stderr, ms: performance.now() - t0, trace: trace ? new TextDecoder().decode(trace) : null, module: module.file, kernels: engine.kernels() });
    }
  } catch (e) {
    post({ type: 'fatal', msg: String(e && e.stack ? e.stack : e) });
  }
};
