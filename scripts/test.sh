#!/usr/bin/env bash
# Sets up (packages + Release build) and runs every test with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export LUMEN_SHARED="${LUMEN_SHARED:-$(cd .. && pwd)/shared}"
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
