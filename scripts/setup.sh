#!/usr/bin/env bash
# Installs every Debian 12 package lumen needs (apt-get) and builds it (Release) into build/.
# Usage: scripts/setup.sh [--no-build]
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential g++ cmake ninja-build pkg-config git
  libfmt-dev nlohmann-json3-dev libpcre2-dev libcli11-dev libboost1.81-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev          # libFuzzer target and sanitizer runtimes
  python3 python3-numpy             # ../shared/tools/synth_gguf.py for synthetic test models
  prometheus                        # promtool, which checks /metrics in tests/e2e/server
  chromium                          # the web page's browser tests (tests/e2e/webui, playwright-core)
)
# Node.js and npm for the server's end-to-end tests (tests/e2e/server), unless a node is
# already on PATH (e.g. from NodeSource).
command -v node >/dev/null 2>&1 || PACKAGES+=(nodejs npm)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# npm packages, exactly as each package-lock.json pins them; again whenever the lockfile is newer
# than what is installed: the web page's build (webui: esbuild) and the end-to-end tests'
# (tests/e2e/server: openai; tests/e2e/webui: playwright-core, which drives Debian's chromium).
for dir in webui tests/e2e/server tests/e2e/webui; do
  if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules" ]; then
    (cd "$dir" && npm ci --no-audit --no-fund && touch node_modules)
  fi
done

[ "${1:-}" = "--no-build" ] && exit 0
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build
