// web_replay_browser.mjs - `recall replay` inside the page's module in headless Chromium (the
// browser the page is for), for bench/web_vs_native.sh: serves SITE on loopback, opens the page,
// runs the demo dialogue's replay ROUNDS times in the page's worker and prints one line per round,
// "browser replay: S s", after checking each trace against the native one in NATIVE_TRACE.
//   node bench/web_replay_browser.mjs SITE PROBLEM NATIVE_TRACE ROUNDS NODE_MODULES [--simd P] [--query Q]
// Q: the page's address query, e.g. "?wasm=exact" (the exact-emulation module; web/worker.js).
// Each line ends with the module the page loaded and which multiply-add its wasm kernels ran.
import { createServer } from 'node:http';
import { readFileSync, existsSync } from 'node:fs';
import { extname, join, normalize, resolve } from 'node:path';
import { createRequire } from 'node:module';

const [site, problem, nativeTrace, rounds, nodeModules, ...rest] = process.argv.slice(2);
const flag = (name) => (rest.indexOf(name) >= 0 ? rest[rest.indexOf(name) + 1] : null);
const simd = flag('--simd');
const query = flag('--query') || '';
const puppeteer = createRequire(resolve(nodeModules, 'x.js'))('puppeteer-core');
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.wasm': 'application/wasm', '.json': 'application/json' };
const root = resolve(site);
const server = createServer((req, res) => {
  const path = normalize(join(root, decodeURIComponent(new URL(req.url, 'http://x').pathname)));
  const file = path.endsWith('/') ? join(path, 'index.html') : path;
  if (!file.startsWith(root) || !existsSync(file)) return void res.writeHead(404).end();
  res.writeHead(200, { 'content-type': TYPES[extname(file)] || 'application/octet-stream' });
  res.end(readFileSync(file));
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const browser = await puppeteer.launch({
  executablePath: '/usr/bin/chromium-headless-shell',
  headless: 'shell',
  args: ['--no-sandbox', '--disable-gpu', '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1'],
});
const want = readFileSync(nativeTrace, 'utf8');
let status = 0;
try {
  const page = await browser.newPage();
  await page.goto(`http://127.0.0.1:${server.address().port}/${query}`);
  await page.evaluate(() => localStorage.clear());
  await page.waitForFunction(() => window.recallPage && window.recallPage.state.phase === 'ready', { timeout: 120000 });
  for (let i = 0; i < Number(rounds); i++) {
    const r = await page.evaluate((p, s) => window.recallPage.replay(p, { simd: s }), Number(problem), simd);
    if (r.rc !== 0 || r.trace !== want) {
      console.log(`browser replay: the trace differs from native's (exit ${r.rc})`);
      status = 1;
      break;
    }
    console.log(`browser replay: ${(r.ms / 1000).toFixed(3)} s; ${r.module}: ${r.kernels}`);
  }
} finally {
  await browser.close();
  server.close();
}
process.exit(status);
