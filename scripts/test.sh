#!/usr/bin/env bash
# Install what is needed, build the ASan+UBSan (clang, libFuzzer) tree and run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
BUILD=${PFR_TEST_BUILD:-build-test}
cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
      -DPFR_SANITIZE=ON -DPFR_FUZZ=ON
cmake --build "$BUILD" -j"$(nproc)"
ctest --test-dir "$BUILD" --output-on-failure -j2 --timeout 900 "$@"
