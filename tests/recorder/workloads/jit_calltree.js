// A JIT-compiled call tree for the recorder's tests: each round, pfrJitWork calls pfrJitHeavy for
// three units of CPU time and pfrJitLight for one, so 3/4 of the time under the two is under
// pfrJitHeavy; for the CPU seconds given (default 3), and at most eight times that in wall time (a
// loaded machine still gives the profiler as many samples). Run it with `node --perf-basic-prof`
// so V8 writes /tmp/perf-PID.map.
//
// As in calltree_lib.c, the split is a schedule on a CPU clock, not a count of iterations: V8 may
// compile two loops, or one loop at two moments, into code of different speed (issue 35). Node 20
// has no thread CPU clock: this is the process's, which also counts V8's helper threads; they
// work mostly at start-up, at random against the slots, so the split holds on average.
"use strict";

const CHUNK = 20000; // iterations between two reads of the clock: 0.1-0.5 ms
const UNIT_US = 1000; // a unit of CPU time is 1-3 ms, drawn at random each round (no beat)

function cpuUs() {
  const u = process.cpuUsage();
  return u.user + u.system;
}

// spins until the CPU clock reads until (microseconds)
function pfrJitHeavy(until) {
  let s = 0;
  while (cpuUs() < until) for (let i = 0; i < CHUNK; i++) s += Math.sqrt(i * 1.0001);
  return s;
}

function pfrJitLight(until) {
  let s = 0;
  while (cpuUs() < until) for (let i = 0; i < CHUNK; i++) s += Math.sqrt(i * 1.0001);
  return s;
}

function pfrJitWork(start, unit) {
  return pfrJitHeavy(start + 3 * unit) + pfrJitLight(start + 4 * unit);
}

const secs = Number(process.argv[2] || 3);
const cpuEnd = cpuUs() + secs * 1e6;
const wallEnd = Date.now() + 8 * secs * 1000;
let slot = cpuUs();
let x = 0;
while (cpuUs() < cpuEnd && Date.now() < wallEnd) {
  const unit = UNIT_US + Math.floor(Math.random() * 2 * UNIT_US);
  x += pfrJitWork(slot, unit);
  slot += 4 * unit;
}
if (x < 0) console.log(x);
