#!/usr/bin/env bash
# Install what is needed, build the ASan+UBSan (clang, libFuzzer) tree and run every test.
# On a machine set up by install-deps.sh --test (as root) no test has a reason to skip: a skipped test
# fails the run, so a missing dependency cannot pass for green.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's wall time and the CPU time (user + system) of the processes it waited for, printed
# last with the slowest tests: a CI log's tail says where the run's time went.
PHASES=()
phase_t0=$SECONDS
phase_cpu0=0
# children_cpu: CPU_NOW = the CPU seconds of every process this shell has waited for (`times`,
# 2nd line; called as a command, not in $(...): a subshell's children are its own)
children_cpu() {
  local f
  f=$(mktemp)
  times >"$f"
  CPU_NOW=$(awk 'NR == 2 { n = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); n += a[1] * 60 + a[2] }
                printf "%.0f", n }' "$f")
  rm -f "$f"
}
# phase_done NAME: the phase since the last one ended
phase_done() {
  children_cpu
  PHASES+=("$(printf '%-34s %5d s wall %6d s CPU' "$1" $((SECONDS - phase_t0)) $((CPU_NOW - phase_cpu0)))")
  phase_t0=$SECONDS
  phase_cpu0=$CPU_NOW
}
print_phases() {
  local p
  echo "scripts/test.sh phases:"
  for p in "${PHASES[@]}"; do echo "  $p"; done
}
bash scripts/install-deps.sh --test
phase_done install-deps
BUILD=${PFR_TEST_BUILD:-build-test}
# The release build users get from scripts/run.sh is gcc's: it must build with -Werror too
# (gcc and clang warn about different things), tests and benchmarks included. It is configured
# and built beside the sanitized tree: neither build keeps both cores busy all the time (configure,
# code generators, link steps waiting for their objects), and each fills the other's gaps.
# It is laid out for /usr + /etc, as the Debian package is, and passed to the sanitized tree
# (PFR_RELEASE_TREE): package_deb_build packages it instead of compiling the release again, and
# the resource bounds run in it as tests of the one ctest run below (release_*).
GCC_BUILD=${PFR_GCC_BUILD:-build-gcc}
mkdir -p "$GCC_BUILD"
gcc_log="$GCC_BUILD/build.log"
(cmake -S . -B "$GCC_BUILD" -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_SYSCONFDIR=/etc &&
  cmake --build "$GCC_BUILD" -j"$(nproc)") >"$gcc_log" 2>&1 &
gcc_pid=$!
# gcc_built: wait for the gcc tree's build; its log's tail when it failed
gcc_built() {
  wait "$gcc_pid" && return 0
  tail -40 "$gcc_log"
  echo "scripts/test.sh: the $GCC_BUILD build failed (all of it in $gcc_log)"
  return 1
}
test_built=0
cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
  -DPFR_SANITIZE=ON -DPFR_FUZZ=ON -DPFR_FUZZ_SECONDS=3 -DPFR_RELEASE_TREE="$(cd "$GCC_BUILD" && pwd)" &&
  cmake --build "$BUILD" -j"$(nproc)" && test_built=1
phase_done "build $BUILD, $GCC_BUILD beside"
gcc_built || exit 1
[ "$test_built" = 1 ] || exit 1
phase_done "build $GCC_BUILD: the rest"
log="$BUILD/ctest-last.log"
rm -f "$log"
# Last in the output, whatever failed: the slowest tests and the totals (a CI log shows only its
# head and its tail).
trap 'python3 scripts/test_times.py -n 40 "asan=$log" || true
      print_phases
      echo "scripts/test.sh: ${SECONDS} s in all"' EXIT
ctest --test-dir "$BUILD" --output-on-failure -j2 --timeout 900 "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
phase_done "ctest $BUILD"
[ "$rc" -eq 0 ] || exit "$rc"
# A skip is a failure (cmocka's skip() exits 0, so ctest alone passes it), unless
# tests/skips-allowed.txt names it with its reason.
python3 scripts/check_skips.py "$BUILD/Testing/Temporary/LastTest.log" "$log" \
  tests/skips-allowed.txt
# The resource bounds of the release build (the recorder's RSS under a process storm and
# intervals on time, the shipper's backfill under a 96 MiB cgroup, the symbolizer's peak on
# hostile files) ran above, as the tests release_* (tests/CMakeLists.txt).
