// A JIT-compiled call tree for the recorder's tests: pfrJitWork calls pfrJitHeavy (about 3/4 of
// the work) and pfrJitLight (about 1/4), for the seconds given (default 3). Run it with
// `node --perf-basic-prof` so V8 writes /tmp/perf-PID.map.
"use strict";

function pfrJitHeavy(n) {
  let s = 0;
  for (let i = 0; i < n; i++) s += Math.sqrt(i * 1.0001) % 7;
  return s;
}

function pfrJitLight(n) {
  let s = 0;
  for (let i = 0; i < n; i++) s += Math.sqrt(i * 1.0003) % 5;
  return s;
}

function pfrJitWork() {
  return pfrJitHeavy(300000) + pfrJitLight(100000);
}

const end = Date.now() + Number(process.argv[2] || 3) * 1000;
let x = 0;
while (Date.now() < end) x += pfrJitWork();
if (x < 0) console.log(x);
