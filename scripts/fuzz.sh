#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (build-fuzz/) and runs each for a bounded time.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
scripts/setup.sh --no-build
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DLUMEN_FUZZ=ON -DLUMEN_BUILD_TESTS=OFF -DLUMEN_BUILD_BENCH=OFF >/dev/null
ninja -C build-fuzz $(cd tests/fuzz && ls *.cpp | sed 's/\.cpp$//')
shared="${LUMEN_SHARED:-$(cd .. && pwd)/shared}"
for src in tests/fuzz/*.cpp; do
  name=$(basename "$src" .cpp)
  corpus=$(mktemp -d)
  # Seed with real files so the fuzzer starts from valid structure.
  cp "$shared"/models/*.gguf "$shared"/models/legacy/*.gguf "$corpus"/ 2>/dev/null || true
  echo "== fuzzing $name for ${secs}s"
  ./build-fuzz/tests/fuzz/"$name" -max_total_time="$secs" -max_len=2000000 -rss_limit_mb=4096 \
    -print_final_stats=1 "$corpus" 2>&1 | tail -15
  rm -rf "$corpus"
done
