#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (build-fuzz/) and runs each for a bounded time.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
scripts/setup.sh --no-build
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DLUMEN_FUZZ=ON -DLUMEN_BUILD_TESTS=OFF -DLUMEN_BUILD_BENCH=OFF >/dev/null
ninja -C build-fuzz lumen_parsers $(cd tests/fuzz && ls *.cpp | sed 's/\.cpp$//')
shared="${LUMEN_SHARED:-$(cd .. && pwd)/shared}"

# Seeds: small files with valid structure. Whole models (MBs each) made every execution copy and
# parse megabytes (~120 exec/s); the first 64 KiB of each real file (header, vocabulary, tensor
# infos up to the cut) plus tiny complete files from GgufWriter give the same structure at a
# fraction of the cost.
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
for f in "$shared"/models/*.gguf "$shared"/models/legacy/*.gguf \
         "$shared"/models/quant/small256-{Q4_K_M-mix,Q8_0,IQ4_NL,BF16}.gguf \
         "$shared"/vocab/ggml-vocab-{gpt-2,llama-spm}.gguf; do
  [ -f "$f" ] && head -c 65536 "$f" >"$seeds/$(basename "$f")"
done
# Built like the library it links (coverage-instrumented, ASan + UBSan), without libFuzzer's main.
clang++ -std=c++20 -O1 -fsanitize=fuzzer-no-link,address,undefined -Isrc \
  tests/fuzz/seeds/make_gguf_seeds.cpp build-fuzz/tests/fuzz/liblumen_parsers.a -lfmt -lpcre2-8 -pthread \
  -o build-fuzz/make_gguf_seeds
./build-fuzz/make_gguf_seeds "$seeds"

# One target: its corpus, its dictionary, its log (printed when it ends, so the targets that run
# side by side do not interleave their lines). Exit status non-zero on a crash.
fuzz_one() {
  local name=$1 corpus
  corpus=$(mktemp -d)
  # The GGUF reader starts from the model prefixes; every other target from its own folder of
  # small seeds, tests/fuzz/seeds/<target>/.
  if [ "$name" = fuzz_gguf ]; then cp "$seeds"/* "$corpus"/;
  elif [ -d "tests/fuzz/seeds/$name" ]; then cp -r "tests/fuzz/seeds/$name"/. "$corpus"/; fi
  # A target may bring a dictionary of its input's keywords: tests/fuzz/<target>.dict.
  local dict=()
  [ -f "tests/fuzz/$name.dict" ] && dict=(-dict="tests/fuzz/$name.dict")
  # A crash leaves its input as crash-* in the current folder and a non-zero exit status.
  local rc=0
  ./build-fuzz/tests/fuzz/"$name" -max_total_time="$secs" -max_len=131072 -rss_limit_mb=4096 \
    -print_final_stats=1 "${dict[@]}" "$corpus" >"$corpus.log" 2>&1 || rc=1
  echo "== fuzzed $name for ${secs}s ($(ls "$corpus" | wc -l) inputs in its corpus at the end)"
  tail -15 "$corpus.log"
  rm -rf "$corpus" "$corpus.log"
  return $rc
}

# The targets are single-threaded: as many run side by side as there are cores.
status=0
jobs_max=$(nproc)
pids=()
for src in tests/fuzz/*.cpp; do
  fuzz_one "$(basename "$src" .cpp)" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$jobs_max" ]; then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
done
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
exit $status
