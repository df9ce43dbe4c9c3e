// test_web.mjs - make test-web: the page in a real browser (Debian's chromium-headless-shell,
// driven by npm's puppeteer-core), served from build/web on loopback, every answer and event
// checked against the native engine on the same input.
//
//   1. a person's dialogue typed into the chat box (a fact, small talk, the question; built from
//      the demo bench's templates, so no answer text is pinned): every streamed reply equals
//      `recall chat --simd scalar` on the same lines, byte for byte, and so does every loop event
//      the page drew (rebuilds, gate scores, fires: chat's --trace lines); the reply arrived token
//      by token (one token event per id, the first before the turn ended);
//   2. the arm switched to SP in the page, the question asked again: equal to native chat on the
//      same session with --arm SP;
//   3. the page reloaded: the session kept in the browser (ids only) comes back, the same text;
//   4. `recall replay` of the demo dialogue inside the page's module (the wasm kernel path and the
//      scalar one, RC_bge and SP): the trace byte-identical to native `recall replay --simd scalar`,
//      on recall-relaxed.wasm with relaxed-simd's multiply-add proven fused;
//   5. a truncated and a foreign blob picked as files: the library's message in the page, the
//      page still on its world and able to answer; then another good blob (--other-blob): a new
//      conversation on it, equal to native chat there;
//   6. no request leaves 127.0.0.1; screenshots mid-turn and after the answer under build/;
//   7. the fallbacks (docs/WEB.md, "Two modules"): the page forced onto recall.wasm (?wasm=exact),
//      onto relaxed-simd's module with its multiply-add off (?madd=off) and with a simulated unfused
//      one (?madd=unfused, which the module's load-time proof must refuse): each replay's trace
//      byte-identical to native, and each check names the module and multiply-add that ran
//      (step 4 requires relaxed-simd's multiply-add proven fused in this browser).
//   0. (first) the examples page.js offers are on the page as buttons and a click puts one in the
//      chat box; the line on what the world does not understand is shown.
// Ends with "test-web: N passed, M failed" and exits non-zero on any failure.
import { spawnSync } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtempSync, readFileSync, writeFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { extname, join, resolve, normalize } from 'node:path';
import { createRequire } from 'node:module';

const opt = {};
for (let i = 2; i < process.argv.length; i += 2) opt[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
for (const k of ['recall', 'site', 'blob', 'bench', 'problem', 'node-modules', 'out'])
  if (opt[k] === undefined) throw new Error(`test_web.mjs: --${k} is required`);
const require = createRequire(resolve(opt['node-modules'], 'x.js'));
const puppeteer = require('puppeteer-core');
const CHROME = opt.chrome || '/usr/bin/chromium-headless-shell';
const TURN_MS = 120000;

let passed = 0, failed = 0;
function check(ok, what, detail = '') {
  if (ok) passed++;
  else failed++;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}${!ok && detail ? `\n     ${detail}` : ''}`);
  return ok;
}

// ---- native references ----------------------------------------------------------------------
const work = mkdtempSync(join(tmpdir(), 'recall-web-'));
function run(args, input = '') {
  const r = spawnSync(opt.recall, args, { input, encoding: 'utf8', maxBuffer: 1 << 28 });
  if (r.status !== 0) throw new Error(`${opt.recall} ${args.join(' ')}: exit ${r.status}\n${r.stderr}`);
  return r;
}
// chat's --trace lines per turn, in the page's words: rebuild / gate / fire, in order
function nativeTurns(stderr) {
  const turns = [[]];
  for (const line of stderr.split('\n')) {
    let m;
    if (line.startsWith('[trace] turn done')) turns.push([]);
    else if ((m = line.match(/^\[trace\] rebuild c0=(\d+) sp=(\d) injected=(\d+) window=(\d+)( edge=\d+)?$/)))
      turns[turns.length - 1].push(`rebuild ${m[1]} ${m[2]} ${m[3]} ${m[4]}`);
    else if ((m = line.match(/^\[trace\] gate c0=(\d+) score=(\S+?)( FIRE)?$/)))
      turns[turns.length - 1].push(`gate ${m[1]} ${m[2]}${m[3] ? ' fire' : ''}`);
    else if ((m = line.match(/^\[trace\] fire c0=(\d+) candidates=(\d+) top=\[.*\] (?:injected (\d+) ids|held back)/)))
      turns[turns.length - 1].push(`fire ${m[1]} ${m[2]} ${m[3] === undefined ? 'held' : m[3]}`);
  }
  turns.pop();
  return turns;
}
function pageEvents(events) {
  return events.map((e) =>
    e.kind === 'rebuild' ? `rebuild ${e.c0} ${e.hasSp ? 1 : 0} ${e.injLen} ${e.windowLen}`
    : e.kind === 'gate' ? `gate ${e.c0} ${e.score.toFixed(4)}${e.fired ? ' fire' : ''}`
    : `fire ${e.c0} ${e.nCand} ${e.injected ? e.nIds : 'held'}`);
}

const bench = JSON.parse(readFileSync(opt.bench, 'utf8'));
const [kw, val] = bench.facts[0];
const dialogue = [
  bench.fact_user.replace('{kw}', kw).replace('{val}', val),
  bench.casual[0][0],
  bench.casual[1][0],
  bench.casual[2][0],
  bench.question_user.replace('{kw}', kw),
];
const session = join(work, 'native.rcs');
// the page's loop runs the chat setting docs/WORLD.md recommends (web_api.c, web_loop_open)
const common = ['--simd', 'scalar', '--threads', '1', '--trace', '--mode', 'clean', '--span', 'exchange', '--edge', 'exchange', '--rerank', 'single'];
const nat = run(['chat', opt.blob, ...common, '--session', session], dialogue.join('\n') + '\n');
const natReplies = nat.stdout.split('\n').slice(0, dialogue.length);
const natEvents = nativeTurns(nat.stderr);
const natSp = run(['chat', opt.blob, ...common, '--session', session, '--arm', 'SP'], dialogue[dialogue.length - 1] + '\n');
const natSpReply = natSp.stdout.split('\n')[0];
const natSpEvents = nativeTurns(natSp.stderr)[0];
const traces = {};
for (const arm of ['RC_bge', 'SP']) {
  const out = join(work, `native-${arm}.json`);
  run(['replay', opt.blob, '--bench', opt.bench, '--problem', opt.problem, '--arm', arm, '--simd', 'scalar', '--threads', '1', '--trace', out]);
  traces[arm] = readFileSync(out, 'utf8');
}
const t0n = performance.now();
run(['replay', opt.blob, '--bench', opt.bench, '--problem', opt.problem, '--simd', 'scalar', '--threads', '1', '--trace', join(work, 'timing.json')]);
const nativeReplayMs = performance.now() - t0n;
const blobBytes = readFileSync(opt.blob);
const truncated = join(work, 'truncated.blob');
writeFileSync(truncated, blobBytes.subarray(0, Math.floor(blobBytes.length / 2)));
const foreign = join(work, 'foreign.blob');
writeFileSync(foreign, readFileSync(opt.bench));

// ---- the site on loopback ----------------------------------------------------------------------
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.wasm': 'application/wasm', '.json': 'application/json' };
const root = resolve(opt.site);
const server = createServer((req, res) => {
  const path = normalize(join(root, decodeURIComponent(new URL(req.url, 'http://x').pathname)));
  const file = path.endsWith('/') ? join(path, 'index.html') : path;
  if (!file.startsWith(root) || !existsSync(file)) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'content-type': TYPES[extname(file)] || 'application/octet-stream', 'cache-control': 'no-store' });
  res.end(readFileSync(file));
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const url = `http://127.0.0.1:${server.address().port}/`;

const browser = await puppeteer.launch({
  executablePath: CHROME,
  headless: 'shell',
  // no host but loopback resolves: a request meant for the network fails instead of leaving
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update',
    '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1'],
});
const offsite = [];
const consoleErrors = [];
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  // (request interception would stall the worker's fetches: the requests are only recorded)
  page.on('request', (r) => {
    const u = r.url();
    if (!(u.startsWith(url) || u.startsWith('data:') || u.startsWith('blob:'))) offsite.push(u);
  });
  page.on('console', (m) => m.type() === 'error' && consoleErrors.push(m.text()));
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
  const ready = () => page.waitForFunction(() => window.recallPage && window.recallPage.state.phase === 'ready', { timeout: TURN_MS })
    .catch(async (e) => {
      const st = await page.evaluate(() => document.getElementById('status')?.textContent).catch(() => '?');
      throw new Error(`the page never became ready (status: ${st}; console: ${consoleErrors.join(' | ')}): ${e.message}`);
    });
  // recall replay of the demo dialogue in the page's worker, per [arm, simd]: the trace byte for
  // byte native's, on the module and multiply-add expected (which ran is shown and checked)
  const replays = async (query, runs, module, kernels) => {
    for (const [arm, simd] of runs) {
      const r = await page.evaluate((p, s, a) => window.recallPage.replay(p, { simd: s, arm: a }), Number(opt.problem), simd, arm);
      const same = r.rc === 0 && r.trace === traces[arm];
      const tag = `${arm}-${simd || 'wasm'}${query.replace(/[?=]/g, '-')}`;
      if (!same && r.trace) writeFileSync(join(opt.out, `web-trace-${tag}.json`), r.trace);
      check(same, `replay in the browser${query ? ` (page ${query})` : ''} (${arm}, ${simd ? 'scalar' : 'wasm SIMD128'} kernels): the trace is byte-identical to native --simd scalar (${r.trace ? r.trace.length : 0} bytes, ${(r.ms / 1000).toFixed(2)} s; native ${(nativeReplayMs / 1000).toFixed(2)} s)`,
        r.rc ? r.stderr : `see ${opt.out}/web-trace-${tag}.json`);
      const ran = simd || 'wasm';
      check(new RegExp(`arm ${arm}, simd ${ran},`).test(r.stderr) && r.module === module && kernels.test(r.kernels),
        `that replay ran arm ${arm} on the ${ran} path of ${r.module} (its wasm path: ${r.kernels})`, `${r.stderr.split('\n')[0]}; wanted ${module}: ${kernels}`);
    }
  };
  const t0 = performance.now();
  await page.goto(url);
  await page.evaluate(() => localStorage.clear());
  await page.reload();
  await ready();
  const loadMs = performance.now() - t0;

  // 0. what the page says it understands: page.js's examples shown as buttons, a click puts one in
  // the box (the box is emptied again before the typed dialogue), and the line on what it does not
  const ex = await page.evaluate(() => window.recallPage.examples);
  const exTexts = [...ex.tell, ...ex.chat, ...ex.ask];
  const shownEx = await page.$$eval('#examples button.example', (bs) => bs.map((b) => b.textContent));
  const limits = await page.$eval('#limits', (e) => e.textContent);
  check(ex.tell.length >= 2 && ex.ask.length === ex.tell.length && JSON.stringify(shownEx) === JSON.stringify(exTexts) &&
    /does not understand/.test(limits) && limits === ex.limits,
    `the page shows its ${ex.tell.length} example facts, ${ex.chat.length} lines of small talk and ${ex.ask.length} questions, and what it does not understand`,
    `shown: ${JSON.stringify(shownEx)}; limits: ${JSON.stringify(limits)}`);
  const filled = [];
  for (const i of [0, exTexts.length - 1]) {
    await (await page.$$('#examples button.example'))[i].click();
    filled.push(await page.$eval('#input', (e) => (document.activeElement === e ? e.value : '(not focused)')));
  }
  check(filled[0] === exTexts[0] && filled[1] === exTexts.at(-1), 'a click on an example puts its text in the box (focused, not sent)',
    JSON.stringify(filled));
  await page.$eval('#input', (e) => { e.value = ''; });
  check(await page.evaluate(() => window.recallPage.state.log.length) === 0, 'no turn was sent by the clicks');

  // 1. the dialogue, typed
  const midShot = join(opt.out, 'web-midturn.png');
  for (let i = 0; i < dialogue.length; i++) {
    await page.type('#input', dialogue[i]);
    await page.keyboard.press('Enter');
    if (i === dialogue.length - 1) {
      // the question: a screenshot while its reply streams
      await page.waitForFunction(() => {
        const m = document.querySelector('.msg.assistant.streaming');
        return m && Number(m.dataset.tokens || 0) >= 4;
      }, { timeout: TURN_MS, polling: 5 }).then(() => page.screenshot({ path: midShot }), () => {});
    }
    await page.waitForFunction((n) => window.recallPage.state.log.length === n && window.recallPage.state.phase === 'ready', { timeout: TURN_MS }, i + 1);
  }
  check(existsSync(midShot), 'screenshot of the page mid-turn', midShot);
  const log = await page.evaluate(() => window.recallPage.state.log);
  for (let i = 0; i < dialogue.length; i++) {
    check(log[i].reply === natReplies[i], `turn ${i + 1}: the streamed reply equals native recall chat's`, `page:   ${JSON.stringify(log[i].reply)}\n     native: ${JSON.stringify(natReplies[i])}`);
    const pe = pageEvents(log[i].events), ne = natEvents[i] || [];
    check(JSON.stringify(pe) === JSON.stringify(ne), `turn ${i + 1}: the ${pe.length} loop events drawn equal native chat's trace`, `page:   ${pe.join(' | ')}\n     native: ${ne.join(' | ')}`);
    check(log[i].tokenEvents === log[i].tokens && log[i].tokens > 0 && log[i].firstTokenMs < log[i].ms,
      `turn ${i + 1}: streamed token by token (${log[i].tokenEvents} events for ${log[i].tokens} ids, first at ${log[i].firstTokenMs?.toFixed(0)} ms of ${log[i].ms.toFixed(0)})`);
  }
  const q = log[dialogue.length - 1];
  const drawn = await page.evaluate(() => ({
    gates: document.querySelectorAll('.turn-view circle.gate').length,
    fires: document.querySelectorAll('.turn-view line.fire').length,
    turns: document.querySelectorAll('.turn-view').length,
    threshold: document.querySelectorAll('.turn-view line.threshold').length,
  }));
  const nGates = log.reduce((a, t) => a + t.events.filter((e) => e.kind === 'gate').length, 0);
  const nFires = log.reduce((a, t) => a + t.events.filter((e) => e.kind === 'fire').length, 0);
  check(drawn.turns === dialogue.length && drawn.gates === nGates && drawn.fires === nFires && drawn.threshold === dialogue.length,
    `the loop drawn: ${drawn.turns} turn panels, ${drawn.gates} gate checks, ${drawn.fires} fires, a threshold line each`, JSON.stringify(drawn));
  const answerShot = join(opt.out, 'web-answer.png');
  await page.screenshot({ path: answerShot });
  check(existsSync(answerShot), 'screenshot of the page after the answer', answerShot);

  // 2. the SP arm, the question again
  await page.select('#arm', 'SP');
  await page.waitForFunction(() => window.recallPage.state.arm === 'SP' && window.recallPage.state.phase === 'ready', { timeout: TURN_MS });
  await page.type('#input', dialogue[dialogue.length - 1]);
  await page.keyboard.press('Enter');
  await page.waitForFunction((n) => window.recallPage.state.log.length === n && window.recallPage.state.phase === 'ready', { timeout: TURN_MS }, dialogue.length + 1);
  const sp = (await page.evaluate(() => window.recallPage.state.log)).at(-1);
  check(sp.arm === 'SP' && sp.reply === natSpReply, 'SP arm: the reply equals native recall chat --arm SP on the same session', `page: ${JSON.stringify(sp.reply)}\n     native: ${JSON.stringify(natSpReply)}`);
  check(JSON.stringify(pageEvents(sp.events)) === JSON.stringify(natSpEvents), 'SP arm: the loop events equal native chat\'s trace (no gate on SP)', `page: ${pageEvents(sp.events).join(' | ')}\n     native: ${(natSpEvents || []).join(' | ')}`);

  // 3. the session kept in the page
  const before = await page.evaluate(() => [...document.querySelectorAll('.msg .text')].map((e) => e.textContent));
  const stored = await page.evaluate(() => JSON.parse(localStorage.getItem('recall.session.v1')));
  check(stored && stored.turns.length === dialogue.length + 1 && stored.turns.every((t) => t.seg.every(Number.isInteger) && t.reply.every(Number.isInteger)),
    `the session in localStorage: ${stored?.turns.length} turns of token ids`);
  await page.reload();
  await ready();
  await page.waitForFunction((n) => document.querySelectorAll('.msg').length === n, { timeout: TURN_MS }, before.length);
  const after = await page.evaluate(() => [...document.querySelectorAll('.msg .text')].map((e) => e.textContent));
  const replies = (a) => a.filter((_, i) => i % 2 === 1);
  check(JSON.stringify(replies(after)) === JSON.stringify(replies(before)), `reloaded: the ${after.length / 2} turns come back from the ids, the same replies`);
  check(JSON.stringify(after.filter((_, i) => i % 2 === 0)) === JSON.stringify(dialogue.concat([dialogue.at(-1)])), 'reloaded: the user messages decode to what was typed');

  // 4. recall replay inside the page's module: the module the page chose (here relaxed-simd's
  // multiply-add, proven fused at load), its wasm and scalar paths
  const chosen = await page.evaluate(() => ({ module: window.recallPage.state.module, kernels: window.recallPage.state.kernels }));
  check(chosen.module === 'recall-relaxed.wasm' && /^fused multiply-add \(relaxed-simd's madd proven fused/.test(chosen.kernels),
    `the page loaded ${chosen.module}: ${chosen.kernels}`, 'this browser\'s relaxed-simd multiply-add was not proven fused: the fused path did not run');
  await replays('', [['RC_bge', null], ['RC_bge', 'scalar'], ['SP', null]], 'recall-relaxed.wasm', /^fused multiply-add/);

  // 5. bad blobs picked by the user
  for (const [file, why] of [[truncated, /truncated/], [foreign, /not a recall blob|magic/]]) {
    const input = await page.$('#blob');
    const nErr = await page.evaluate(() => window.recallPage.state.blobErrors.length);
    await input.uploadFile(file);
    await page.waitForFunction((n) => window.recallPage.state.blobErrors.length === n + 1 && window.recallPage.state.phase === 'ready', { timeout: TURN_MS }, nErr);
    const shown = await page.evaluate(() => ({ text: document.getElementById('blob-error').textContent, hidden: document.getElementById('blob-error').hidden, blob: window.recallPage.state.blob, fatal: window.recallPage.state.fatal }));
    check(!shown.hidden && why.test(shown.text) && shown.text.includes(file.split('/').pop()) && !shown.fatal && shown.blob.startsWith('world.blob'),
      `a ${file.includes('trunc') ? 'truncated' : 'foreign'} blob: the page says why and keeps its world`, JSON.stringify(shown));
  }
  await page.type('#input', dialogue[1]);
  await page.keyboard.press('Enter');
  await page.waitForFunction((n) => window.recallPage.state.log.length === n && window.recallPage.state.phase === 'ready', { timeout: TURN_MS }, 1);
  const afterBad = (await page.evaluate(() => window.recallPage.state.log)).at(-1);
  check(afterBad && afterBad.tokens > 0, 'after the bad blobs the page still answers');
  await page.screenshot({ path: join(opt.out, 'web-bad-blob.png') });

  // another good blob picked by the user: a new conversation on it, equal to native chat there
  if (opt['other-blob']) {
    const name = opt['other-blob'].split('/').pop();
    await (await page.$('#blob')).uploadFile(opt['other-blob']);
    await page.waitForFunction((n) => window.recallPage.state.blob === n && window.recallPage.state.phase === 'ready', { timeout: TURN_MS }, name);
    const cleared = await page.evaluate(() => document.querySelectorAll('.msg').length);
    const nLog = await page.evaluate(() => window.recallPage.state.log.length);
    await page.type('#input', dialogue[0]);
    await page.keyboard.press('Enter');
    await page.waitForFunction((n) => window.recallPage.state.log.length === n && window.recallPage.state.phase === 'ready', { timeout: TURN_MS }, nLog + 1);
    const other = (await page.evaluate(() => window.recallPage.state.log)).at(-1);
    const natOther = run(['chat', opt['other-blob'], ...common], dialogue[0] + '\n');
    check(cleared === 0 && other.reply === natOther.stdout.split('\n')[0] &&
      JSON.stringify(pageEvents(other.events)) === JSON.stringify(nativeTurns(natOther.stderr)[0]),
      `another blob picked (${name}): a new conversation, its reply and loop events equal native chat's on it`,
      `page: ${JSON.stringify(other.reply)}\n     native: ${JSON.stringify(natOther.stdout.split('\n')[0])}`);
  }

  // 7. the fallbacks, each in a page of its own: the exact-emulation module as an engine without
  // relaxed-simd loads it (?wasm=exact); the relaxed module with its multiply-add switched off; and
  // with a simulated unfused multiply-add (mul then add), which its load-time proof must refuse
  await page.goto(url + '?wasm=exact');
  await ready();
  await replays('?wasm=exact', [['RC_bge', null], ['SP', null]], 'recall.wasm', /^exact emulation \(this module has no relaxed-simd\)$/);
  await page.goto(url + '?madd=off');
  await ready();
  await replays('?madd=off', [['RC_bge', null]], 'recall-relaxed.wasm', /^exact emulation \(RECALL_WASM_MADD=off\)$/);
  await page.goto(url + '?madd=unfused');
  await ready();
  await replays('?madd=unfused', [['RC_bge', null]], 'recall-relaxed.wasm', /^exact emulation \(the simulated unfused madd \(RECALL_WASM_MADD=unfused\) is not fused: lane 0:/);

  check(offsite.length === 0, 'no request left 127.0.0.1', offsite.join(' '));
  check(consoleErrors.length === 0, 'no error in the page\'s console', consoleErrors.join(' | '));
  console.log(`test-web: page ready in ${loadMs.toFixed(0)} ms; the question's first token after ${q.firstTokenMs.toFixed(0)} ms (${q.tokens} tokens in ${q.ms.toFixed(0)} ms)`);
} finally {
  await browser.close();
  server.close();
  rmSync(work, { recursive: true, force: true });
}
console.log(`test-web: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
