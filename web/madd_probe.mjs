// madd_probe.mjs - prints what web/recall.js's relaxedMadd() finds in this node ("fused",
// "unfused" or "unsupported"): make test-web runs it with and without node 20's relaxed-simd flag,
// so the page's choice of module is checked on both sides.
import { relaxedMadd } from './recall.js';

console.log(`relaxedMadd: ${relaxedMadd()}`);
