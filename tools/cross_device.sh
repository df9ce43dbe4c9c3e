#!/bin/sh
# cross_device.sh - the device profile's recall turn on NEON under qemu-aarch64, against the same
# turn on this host (docs/MEMORY.md, "On aarch64"):
#   sh tools/cross_device.sh NATIVE_BENCH_DEVICE CROSS_BENCH_DEVICE BLOB [bench_device options]
# Runs `bench_device BLOB --profile device OPTIONS` natively, then the aarch64 build under
# qemu-aarch64-static, and compares their result lines:
#   - the digest (every loop event's values and the reply: gate scores, fires, injected ids,
#     rebuilds, tokens) must be equal: the same bits;
#   - the peak RSS under qemu, less qemu's own memory, must lie within QEMU_SLACK_MIB (default 10)
#     of the native peak. qemu's own memory is sampled every second from /proc/PID/smaps of the
#     qemu process: its mappings above the guest's address space (its binary, its heap, the
#     translated code); the guest's mappings (the program, its heap, the blob) lie below 2^44.
# Exit 0 when both hold, 1 otherwise. qemu runs a real-shape turn about 400x slower than this
# host: a 665-token turn of the device profile is 16 s natively and two hours under qemu.
set -e
if [ $# -lt 3 ]; then
  echo "usage: sh tools/cross_device.sh NATIVE_BENCH_DEVICE CROSS_BENCH_DEVICE BLOB [options]" >&2
  exit 2
fi
native=$1 cross=$2 blob=$3
shift 3
slack=${QEMU_SLACK_MIB:-10}
out=${CROSS_DEVICE_OUT:-build-cross/aarch64/device}
mkdir -p "$out"
echo "native: $native $blob --profile device $* ($(date -u +%FT%TZ))"
"$native" "$blob" --profile device "$@" >"$out/native.txt"
echo "qemu-aarch64: $cross ($(date -u +%FT%TZ))"
qemu-aarch64-static -L /usr/aarch64-linux-gnu "$cross" "$blob" --profile device "$@" >"$out/aarch64.txt" &
pid=$!
own=0
while kill -0 "$pid" 2>/dev/null; do
  # qemu's own resident KiB: mappings starting at or above 2^44 (hex addresses of 12+ digits > 0fff...)
  o=$(awk '/^[0-9a-f]+-[0-9a-f]+ / { split($1, r, "-"); hi = length(r[1]) > 11 } /^Rss:/ && hi { s += $2 }
           END { print s + 0 }' "/proc/$pid/smaps" 2>/dev/null || echo 0)
  [ "$o" -gt "$own" ] 2>/dev/null && own=$o
  sleep 1
done
wait "$pid"
echo "done ($(date -u +%FT%TZ)); qemu's own memory at most $own KiB"
field() { sed -n "s/^result: .*[ ]$2=\([^ ]*\).*/\1/p" "$1"; }
for f in native aarch64; do
  grep '^result:' "$out/$f.txt" | sed "s/^/$f /"
done
dn=$(field "$out/native.txt" digest) da=$(field "$out/aarch64.txt" digest)
pn=$(field "$out/native.txt" peak_rss_mib) pa=$(field "$out/aarch64.txt" peak_rss_mib)
awk -v dn="$dn" -v da="$da" -v pn="$pn" -v pa="$pa" -v own="$own" -v slack="$slack" 'BEGIN {
  q = own / 1024; d = pa - q - pn; ad = d < 0 ? -d : d
  printf "digest: native %s, aarch64 %s: %s\n", dn, da, (dn == da && dn != "") ? "the same bits" : "DIFFERENT"
  printf "peak RSS: native %.1f MiB; under qemu %.1f MiB, of it qemu itself %.1f MiB: the program %.1f MiB," \
         " %+.1f MiB from native (allowed %s)\n", pn, pa, q, pa - q, d, slack
  exit !(dn == da && dn != "" && ad <= slack)
}'
