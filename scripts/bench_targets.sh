#!/usr/bin/env bash
# The speed table of README "Performance": writes the benchmark models once (synthetic weights
# with real shapes, ../shared/tools/synth_gguf.py; Q4_K_M by `lumen quantize` of the F16 file),
# measures the roofline now, then runs `lumen bench -t 2 -p 512 -n 128` (pp512, tg128) on each model, then the
# engine benchmarks (`--batch 1,4,16,32 -p 128 -n 64`, `--cached-prefix 1024`) on TinyLlama Q8_0.
# Usage: scripts/bench_targets.sh [MODEL_DIR]   (default /tmp/lumen-bench-models; ~5 GB)
#        scripts/bench_targets.sh --formats [MODEL_DIR]   instead: TinyLlama in every weight format
#        (`lumen quantize` of the F16 file; ~11 GB), each `-p 512 -n 128 -d 0,512,4096 -r 2`.
#        scripts/bench_targets.sh --families [MODEL_DIR]   instead: the real-width presets of the
#        newer families (gemma2-2b-bench, qwen3moe-bench) in Q4_0 and Q8_0 (~8 GB), `-p 512 -n 128 -r 2`.
# Run it on an idle machine. The --formats and --families runs measure the DRAM read bandwidth
# again right before and after each decode test (`--remeasure`): each decode row's share (and
# its verdict line) is of the larger of the two, not of the run's start (this machine's DRAM
# bandwidth moves by 2x within minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED="${LUMEN_SHARED:-$(cd .. && pwd)/shared}"
FORMATS=0
FAMILIES=0
[ "${1:-}" = "--formats" ] && { FORMATS=1; shift; }
[ "${1:-}" = "--families" ] && { FAMILIES=1; shift; }
DIR="${1:-/tmp/lumen-bench-models}"
LUMEN=./build/lumen
[ -x "$LUMEN" ] || { echo "build lumen first (scripts/setup.sh)" >&2; exit 1; }
mkdir -p "$DIR"
synth() {  # preset type file
  [ -f "$DIR/$3" ] || /usr/bin/python3 "$SHARED/tools/synth_gguf.py" --preset "$1" --type "$2" \
    --vocab-from "$SHARED/vocab/ggml-vocab-llama-spm.gguf" --out "$DIR/$3"
}
if [ "$FAMILIES" = 1 ]; then
  "$LUMEN" bench -t 2 --remeasure -p 8 -n 8 -r 1 2>&1 | grep '^machine'
  for p in gemma2-2b-bench qwen3moe-bench; do
    for t in q4_0 q8_0; do
      synth "$p" "$t" "$p-$t.gguf"
      echo "== $p $t"
      "$LUMEN" bench -m "$DIR/$p-$t.gguf" -t 2 -p 512 -n 128 -r 2 --remeasure 2>/dev/null | grep -E '^\| [a-z]|^verdict'
    done
  done
  exit 0
fi
if [ "$FORMATS" = 1 ]; then
  synth tinyllama-1.1b f16 tinyllama-f16.gguf
  "$LUMEN" bench -t 2 --remeasure -p 8 -n 8 -r 1 2>&1 | grep '^machine'
  for t in Q4_0 Q4_1 Q5_0 Q5_1 IQ4_NL Q4_K Q5_K Q6_K Q8_0 F16 BF16; do
    f="$DIR/tinyllama-$(echo "$t" | tr 'A-Z' 'a-z').gguf"
    [ -f "$f" ] || "$LUMEN" quantize "$DIR/tinyllama-f16.gguf" "$f" "$t" >/dev/null
    echo "== tinyllama $t"
    "$LUMEN" bench -m "$f" -t 2 -p 512 -n 128 -d 0,512,4096 -r 2 --remeasure 2>/dev/null | grep -E '^\| [a-z]|^verdict   tg'
  done
  exit 0
fi
synth tinyllama-1.1b q8_0 tinyllama-q8_0.gguf
synth tinyllama-1.1b q4_0 tinyllama-q4_0.gguf
synth tinyllama-1.1b f16 tinyllama-f16.gguf
synth smollm-135m q8_0 smollm-135m-q8_0.gguf
[ -f "$DIR/tinyllama-q4_k_m.gguf" ] || "$LUMEN" quantize "$DIR/tinyllama-f16.gguf" "$DIR/tinyllama-q4_k_m.gguf" Q4_K_M
"$LUMEN" bench -t 2 --remeasure -p 8 -n 8 -r 1 2>&1 | grep '^machine'
for m in tinyllama-q8_0 tinyllama-q4_0 tinyllama-q4_k_m tinyllama-f16 smollm-135m-q8_0; do
  echo "== $m"
  "$LUMEN" bench -m "$DIR/$m.gguf" -t 2 -p 512 -n 128 -r 3 2>/dev/null | grep -E '^\| [a-z]|^verdict'
done
echo "== tinyllama-f16 --f16-as-bf16"
"$LUMEN" bench -m "$DIR/tinyllama-f16.gguf" -t 2 -p 512 -n 128 -r 3 --f16-as-bf16 2>/dev/null | grep -E '^\| [a-z]'
echo "== tinyllama-q8_0 through the engine: --batch 1,4,16,32 -p 128 -n 64"
"$LUMEN" bench -m "$DIR/tinyllama-q8_0.gguf" -t 2 --batch 1,4,16,32 -p 128 -n 64 2>/dev/null | tail -n +5
echo "== tinyllama-q8_0: TTFT with 1024 prompt tokens cached"
"$LUMEN" bench -m "$DIR/tinyllama-q8_0.gguf" -t 2 --cached-prefix 1024 2>/dev/null | grep '^prefix'
