#!/usr/bin/env bash
# Builds lumen with AddressSanitizer + UBSan (build-asan/) and runs every test under them.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --no-build
scripts/configure_asan.sh
ninja -C build-asan
export LUMEN_SHARED="${LUMEN_SHARED:-$(cd .. && pwd)/shared}"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LUMEN_SANITIZED=1   # tests may shrink their heaviest loops
ctest --test-dir build-asan --output-on-failure -j "$(nproc)" "$@"
