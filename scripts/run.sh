#!/usr/bin/env bash
# Install what is needed, build (release) and run the recorder on a local store under the checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPFR_BUILD_TESTS=OFF
cmake --build build -j"$(nproc)"
mkdir -p pfr-data
exec ./build/recorder/pfr-recorder --store ./pfr-data/ring.db "$@"
