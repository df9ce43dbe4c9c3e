// page.js - the page: the chat box, the reply streamed token by token, the loop drawn as it runs
// (loop_view.js), the arm switch, a blob picked from a file, and the conversation kept in this
// browser as token ids (localStorage), the way `recall chat --session` keeps it. The engine runs
// in worker.js; window.recallPage is what make test-web (web/test_web.mjs) reads and drives.
import { LoopView } from './loop_view.js';

const $ = (id) => document.getElementById(id);

// What the page offers to try, in one place: facts the bundled world (tests/golden/wide) answers
// when asked back, small talk to put between, and what it does not understand. The facts, the two
// lines and the questions, in that order, in the page's setting, answer `answers`: the test
// wide/the_page_s_examples_are_answered (tests/test_trained.c) reads this list and checks it, so a
// retrained world that stops answering them fails it. Keep each string on its line in single quotes.
const EXAMPLES = {
  tell: ['Just so you know, my dentist is Dr. Halvorsen.', 'Just so you know, my meeting time is 14:30.', 'The code for the side gate is 4471.'],
  chat: ['How was your weekend?', 'I tried a new recipe for lentil soup and it turned out great.'],
  ask: ['Who is my dentist?', 'What was my meeting time again?', 'What is the code for the side gate?'],
  answers: ['Halvorsen', '14:30', '4471'],
  limits: 'What it does not understand: a question that names the fact in other words (“When do I get in?” '
    + 'after “My flight lands at 7:40”), and many plainly worded facts still (on a blind set of plain chats it '
    + 'answered 15 of 40 with the fact in view). It is a tiny model (a 1.6 M-parameter decoder) trained for this '
    + 'one job, not a general assistant.',
};

// the examples as buttons: a click puts the text in the box (Enter sends it)
function showExamples() {
  const box = $('examples');
  const intro = document.createElement('div');
  intro.className = 'examples-intro';
  intro.textContent = 'Try these (a click puts one in the box; Enter sends it):';
  box.appendChild(intro);
  for (const [key, label] of [['tell', 'tell it'], ['chat', 'chat a little'], ['ask', 'then ask']]) {
    const row = document.createElement('div');
    row.className = 'examples-row';
    const l = document.createElement('span');
    l.className = 'label';
    l.textContent = label;
    row.appendChild(l);
    const chips = document.createElement('span');
    chips.className = 'chips';
    row.appendChild(chips);
    for (const text of EXAMPLES[key]) {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = `example ${key}`;
      b.textContent = text;
      b.addEventListener('click', () => {
        $('input').value = text;
        $('input').focus();
      });
      chips.appendChild(b);
    }
    box.appendChild(row);
  }
  $('limits').textContent = EXAMPLES.limits;
}
showExamples();
const SESSION_KEY = 'recall.session.v1';
const worker = new Worker(new URL('worker.js', import.meta.url), { type: 'module' });
const view = new LoopView($('turns'));

const state = {
  phase: 'loading', // loading | ready | streaming | error
  blob: '',
  arm: 'RC_bge',
  loop: null,
  turns: [], // {seg, reply} ids, the session
  log: [], // {user, reply, firstTokenMs, ms, tokens} per turn sent in this page
  blobErrors: [],
  fatal: null,
  module: null, // the module the worker loaded, and which multiply-add its wasm kernels run
  kernels: null,
};
let streaming = null; // the assistant message being written
let pendingReplay = null;

function setStatus(text, phase) {
  if (phase) state.phase = phase;
  $('status').textContent = text;
  $('status').dataset.state = state.phase;
  const busy = state.phase !== 'ready';
  $('input').disabled = busy;
  $('send').disabled = busy;
  $('arm').disabled = busy;
  $('blob').disabled = busy;
  $('reset').disabled = busy;
}

function addMessage(role, text, meta = '') {
  const d = document.createElement('div');
  d.className = `msg ${role}`;
  const body = document.createElement('span');
  body.className = 'text';
  body.textContent = text;
  d.appendChild(body);
  if (meta) {
    const m = document.createElement('span');
    m.className = 'meta';
    m.textContent = meta;
    d.appendChild(m);
  }
  $('messages').appendChild(d);
  $('messages').scrollTop = $('messages').scrollHeight;
  return d;
}

function saveSession() {
  localStorage.setItem(SESSION_KEY, JSON.stringify({ blob: state.blob, arm: state.arm, turns: state.turns }));
}

function loadSession() {
  try {
    const s = JSON.parse(localStorage.getItem(SESSION_KEY) || 'null');
    return s && s.blob === state.blob && Array.isArray(s.turns) ? s : null;
  } catch {
    return null;
  }
}

function describeLoop() {
  const l = state.loop;
  // the loop's setting is web_api.c's (web_loop_open): the chat setting docs/WORLD.md recommends
  return `${state.blob} · arm ${state.arm} · clean mode, whole exchanges, the question's words · window ${l.window}, block ${l.block}, gate threshold ${l.threshold.toFixed(4)}`;
}

let firstReady = true;
worker.onmessage = ({ data: m }) => {
  if (m.type === 'ready') {
    const newBlob = m.name !== state.blob;
    state.blob = m.name;
    state.arm = m.arm;
    state.loop = m.loop;
    view.setLoop(m.loop, m.arm);
    state.module = m.module;
    state.kernels = m.kernels;
    $('engine').textContent = `${m.module}: ${m.kernels}`;
    $('arm').value = m.arm;
    if (newBlob && !firstReady) {
      // another world: its ids mean other things, so the conversation starts again
      state.turns = [];
      $('messages').replaceChildren();
      view.clear();
      saveSession();
    }
    $('blob-error').hidden = true;
    setStatus(describeLoop(), 'ready');
    if (firstReady) {
      firstReady = false;
      const s = loadSession();
      if (s && s.turns.length) {
        if (s.arm && s.arm !== state.arm) worker.postMessage({ op: 'arm', arm: s.arm });
        state.turns = s.turns;
        worker.postMessage({ op: 'restore', turns: s.turns });
      }
    }
  } else if (m.type === 'restored') {
    for (const t of m.turns) {
      addMessage('user', t.user);
      addMessage('assistant', t.reply, 'restored from this browser’s session (ids only)');
    }
  } else if (m.type === 'blobError') {
    state.blobErrors.push({ name: m.name, msg: m.msg });
    const e = $('blob-error');
    e.textContent = `Could not open “${m.name}”: ${m.msg}. The page keeps the world it had.`;
    e.hidden = false;
    setStatus(describeLoop(), 'ready');
  } else if (m.type === 'turnStart') {
    streaming.events = [];
    streaming.tokenEvents = 0;
    view.startTurn(state.turns.length, m.user, m.feedLen);
  } else if (m.type === 'token') {
    if (!streaming.first) streaming.first = performance.now();
    streaming.tokenEvents++;
    streaming.el.querySelector('.text').textContent = m.text;
    streaming.el.dataset.tokens = String(m.n);
    view.token(m.n);
    $('messages').scrollTop = $('messages').scrollHeight;
  } else if (m.type === 'ev') {
    streaming.events.push(m.ev);
    view.event(m.ev);
  } else if (m.type === 'done') {
    const s = streaming;
    streaming = null;
    const firstTokenMs = s.first ? s.first - s.t0 : null;
    const ms = performance.now() - s.t0;
    s.el.classList.remove('streaming');
    s.el.querySelector('.text').textContent = m.text;
    const meta = document.createElement('span');
    meta.className = 'meta';
    meta.textContent = `${m.reply.length} tokens · first token ${firstTokenMs === null ? '–' : firstTokenMs.toFixed(0) + ' ms'} · ${(ms / 1000).toFixed(2)} s (${(m.reply.length / (m.ms / 1000)).toFixed(0)} tokens/s in the engine)`;
    s.el.appendChild(meta);
    s.el.dataset.done = '1';
    view.finish();
    state.turns.push({ seg: m.seg, reply: m.reply });
    state.log.push({
      user: s.user, arm: state.arm, reply: m.text, firstTokenMs, ms, engineMs: m.ms, engineFirstTokenMs: m.firstTokenMs,
      tokens: m.reply.length, tokenEvents: s.tokenEvents, events: s.events.map(({ text, ids, ...e }) => ({ ...e, nIds: ids ? ids.length : 0 })),
    });
    saveSession();
    setStatus(describeLoop(), 'ready');
    $('input').focus();
  } else if (m.type === 'turnError') {
    streaming.el.classList.remove('streaming');
    streaming.el.querySelector('.text').textContent = `(the turn failed: ${m.msg})`;
    streaming = null;
    setStatus(describeLoop(), 'ready');
  } else if (m.type === 'replayDone') {
    const r = pendingReplay;
    pendingReplay = null;
    setStatus(describeLoop(), 'ready');
    r.resolve(m);
  } else if (m.type === 'fatal') {
    state.fatal = m.msg;
    setStatus(`error: ${m.msg}`, 'error');
  }
};
worker.onerror = (e) => {
  state.fatal = e.message;
  setStatus(`error: ${e.message}`, 'error');
};

function send(text) {
  if (state.phase !== 'ready' || !text.trim()) return false;
  addMessage('user', text);
  const el = addMessage('assistant', '');
  el.classList.add('streaming');
  streaming = { el, t0: performance.now(), first: null, user: text };
  setStatus('thinking… (the loop is drawn on the right as it runs)', 'streaming');
  worker.postMessage({ op: 'send', text });
  return true;
}

$('composer').addEventListener('submit', (e) => {
  e.preventDefault();
  if (send($('input').value)) $('input').value = '';
});
$('input').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey) {
    e.preventDefault();
    $('composer').requestSubmit();
  }
});
$('arm').addEventListener('change', () => {
  setStatus('switching the arm…', 'loading');
  worker.postMessage({ op: 'arm', arm: $('arm').value });
  saveSession();
});
$('reset').addEventListener('click', () => {
  state.turns = [];
  $('messages').replaceChildren();
  view.clear();
  worker.postMessage({ op: 'reset' });
  saveSession();
});
$('blob').addEventListener('change', async () => {
  const f = $('blob').files[0];
  if (!f) return;
  setStatus(`opening ${f.name}…`, 'loading');
  $('blob').value = '';
  let bytes;
  try {
    bytes = await f.arrayBuffer(); // a file too large for this tab fails here, not in the engine
  } catch (e) {
    worker.onmessage({ data: { type: 'blobError', name: f.name, msg: `the browser could not read it (${e.message})` } });
    return;
  }
  worker.postMessage({ op: 'open', name: f.name, bytes }, [bytes]);
});

// For make test-web: the state, sending a message, and `recall replay` run inside the module.
window.recallPage = {
  state,
  send,
  examples: EXAMPLES,
  replay(problem, { simd = null, arm = null } = {}) {
    return new Promise((resolve) => {
      pendingReplay = { resolve };
      setStatus('replaying the demo dialogue inside the module…', 'streaming');
      worker.postMessage({ op: 'replay', problem, simd, arm });
    });
  },
};

// ?wasm=exact: the exact-emulation module even where relaxed-simd fuses; ?madd=off|unfused: the
// relaxed-simd module with RECALL_WASM_MADD set (worker.js, pickModule): make test-web's fallbacks
const q = new URLSearchParams(location.search);
worker.postMessage({ op: 'init', base: new URL('.', import.meta.url).href, opts: { wasm: q.get('wasm'), madd: q.get('madd') } });
