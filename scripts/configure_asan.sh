#!/usr/bin/env bash
# Configures build-asan/: lumen with AddressSanitizer + UBSan, for scripts/test_sanitized.sh and
# scripts/soak.sh alike. -O1 -g1 (line tables: enough for the sanitizers' stack traces): the
# instrumented build at -O2 -g took about 40 of CI's minutes on 2 cores, at -O1 -g1 well under
# half that (engine_core.cpp: 36 s -> 20 s; http_server.cpp: 78 s -> 29 s), for somewhat slower tests.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
  -DLUMEN_SANITIZE=ON -DLUMEN_BUILD_BENCH=OFF >/dev/null
