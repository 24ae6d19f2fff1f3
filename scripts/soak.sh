#!/usr/bin/env bash
# Soak test: `lumen serve` built with ASan + UBSan under 64 streaming clients with random
# cancellations for MINUTES (default 10), then checks 0 errors, 0 KV blocks in use, a flat RSS,
# a clean exit on SIGTERM (exit 0) and no sanitizer report.
# Usage: scripts/soak.sh [MINUTES]   (fractions work: 0.5)
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-10}"
secs=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')
export LUMEN_SHARED="${LUMEN_SHARED:-$(cd .. && pwd)/shared}"
scripts/setup.sh --no-build
scripts/configure_asan.sh
ninja -C build-asan lumen_cli
# A small quarantine, so that ASan's own memory plateaus within the first quarter of the run.
export ASAN_OPTIONS=detect_leaks=1:quarantine_size_mb=16:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

log=$(mktemp)
trap 'kill "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
./build-asan/lumen serve -m "$LUMEN_SHARED/models/stories260K.gguf" --port 0 -t 2 2>"$log" &
pid=$!
port=""
for _ in $(seq 600); do
  port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$log" | head -1)
  [ -n "$port" ] && grep -q "lumen: ready" "$log" && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$log"; echo "soak: the server did not start"; exit 1; }
echo "soak: $secs s against pid $pid on port $port"
status=0
node tests/soak/soak_client.mjs "http://127.0.0.1:$port" "$pid" "$secs" 64 || status=1
kill -TERM "$pid"
server_status=0
wait "$pid" || server_status=$?
trap 'rm -f "$log"' EXIT
if [ "$server_status" -ne 0 ]; then echo "soak: the server exited with status $server_status"; status=1; fi
if grep -qiE "AddressSanitizer|runtime error|LeakSanitizer|leaked" "$log"; then
  echo "soak: the server's log reports a sanitizer finding or leaked KV blocks:"; cat "$log"; status=1
fi
tail -3 "$log"
[ "$status" -eq 0 ] && echo "soak: passed" || echo "soak: FAILED"
exit "$status"
