#!/bin/bash
# Runs every lowered program (CASES/*.ops, from `ginsim validate gin --lower`)
# through real NCCL 2.28.9 with ginsim's plugin: two processes on GPU 0 told
# apart by NCCL_HOSTID, once per fabric line of CASES/fabrics.txt ("NAME SPEC",
# SPEC as GINHW_FABRIC takes it; default: zero). A SPEC "model:SOCKET" (or
# "model:SOCKET FLAGS...") starts `$GINSIM validate fabric-serve --socket
# SOCKET --ranks 2 FLAGS...` for each case (GINSIM: a ginsim binary, built
# where Go is: CGO_ENABLED=0 go build -o DIR/ginsim ./cmd/ginsim) and keeps
# its counters and log beside the case's results. Also runs the plugin's
# bad-input checks. Results (one file per case, fabric and rank, plus the
# plugin's traces) go to $OUT/results.tgz; a summary to $OUT/summary.txt.
# On the GPU machine, from the repository root:
#   bash validate/hw/native/run.sh CASES
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
CASES=$(cd "${1:?usage: run.sh CASES}" && pwd)
OUTD=${OUT:-$(mktemp -d)}
mkdir -p "$OUTD"
B=$(mktemp -d)
R=$B/results
mkdir -p "$R"
exec > >(tee "$OUTD/summary.txt") 2>&1
echo "== machine"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
ls /sys/class/infiniband 2>/dev/null || echo "no RDMA device"
df -h /dev/shm | tail -1
bash "$HERE/build.sh" "$B/bin" || { echo BUILD FAILED; exit 1; }
NC=$(cat "$B/bin/nccl_home")
{
  echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed 's/^/gpu /'
  nvcc --version | tail -2 | head -1 | sed 's/^/nvcc /'
  grep -E '#define NCCL_(MAJOR|MINOR|PATCH) ' "$NC/include/nccl.h" | awk '{printf "%s ", $3}' | sed 's/^/nccl /'
  echo
} > "$R/machine.txt"
cat "$R/machine.txt"

echo "== plugin bad-input checks"
timeout -k 5 60 "$B/bin/ginhw_test" "$B/bin/libnccl-net-ginhw.so" > "$R/ginhw_test.txt" 2>&1
echo "ginhw_test rc=$? ($(grep -c ^PASS "$R/ginhw_test.txt") passed, $(grep -c ^FAIL "$R/ginhw_test.txt") failed)"
grep ^FAIL "$R/ginhw_test.txt"

FABRICS=$CASES/fabrics.txt
[ -f "$FABRICS" ] || { echo "zero zero" > "$B/fabrics.txt"; FABRICS=$B/fabrics.txt; }
COMMON=(NCCL_NVLS_ENABLE=0 NCCL_IB_DISABLE=1 NCCL_MNNVL_ENABLE=0 NCCL_GIN_TYPE=2 NCCL_GIN_NCONTEXTS=1
        NCCL_NET_PLUGIN=$B/bin/libnccl-net-ginhw.so NCCL_DEBUG=WARN GINHW_WAIT_MS=${GINHW_WAIT_MS:-2000}
        GINHW_KERNEL_S=${GINHW_KERNEL_S:-20})
BUDGET=${RUN_BUDGET_S:-480}  # stop starting cases after this many seconds
START=$(date +%s)
# startFabric starts the fabric server of a "model:SOCKET [FLAGS]" spec for
# case tag $1 (FABPID, or the reason it could not in FABERR).
startFabric() {
  FABPID= FABERR=
  local rest=${fspec#model:} sock
  read -r sock fabflags <<< "$rest"
  fspec=model:$sock
  if [ -z "${GINSIM:-}" ] || [ ! -x "$GINSIM" ]; then FABERR="no ginsim binary (set GINSIM)"; return 1; fi
  rm -f "$sock"
  # shellcheck disable=SC2086
  "$GINSIM" validate fabric-serve --socket "$sock" --ranks 2 $fabflags > "$R/$1.fabric.json" 2> "$R/$1.fabric.log" &
  FABPID=$!
  for _ in $(seq 200); do [ -S "$sock" ] && return 0; sleep 0.01; done
  FABERR="fabric server did not start: $(tail -2 "$R/$1.fabric.log")"
  return 1
}
stopFabric() {
  [ -n "${FABPID:-}" ] || return 0
  kill -TERM "$FABPID" 2>/dev/null
  wait "$FABPID"
  FABPID=
}

while read -r fname fspec0; do
  [ -z "$fname" ] && continue
  for ops in "$CASES"/*.ops; do
    c=$(basename "$ops" .ops)
    if [ $(( $(date +%s) - START )) -gt "$BUDGET" ]; then echo "skipped $c $fname: over the ${BUDGET}s budget"; continue; fi
    tag=$c.$fname
    rm -f "$B/id.$tag"*
    fspec=$fspec0
    if [[ $fspec == model:* ]] && ! startFabric "$tag"; then echo "skipped $c $fname: $FABERR"; stopFabric; continue; fi
    t0=$(date +%s.%N)
    env "${COMMON[@]}" GINHW_FABRIC="$fspec" GINHW_TRACE="$R/$tag.trace" NCCL_HOSTID=hostA \
      timeout -k 5 45 "$B/bin/ginexec" 0 2 "$B/id.$tag" "$ops" "$R/$tag.r0.txt" > "$R/$tag.r0.log" 2>&1 &
    p0=$!
    env "${COMMON[@]}" GINHW_FABRIC="$fspec" GINHW_TRACE="$R/$tag.trace" NCCL_HOSTID=hostB \
      timeout -k 5 45 "$B/bin/ginexec" 1 2 "$B/id.$tag" "$ops" "$R/$tag.r1.txt" > "$R/$tag.r1.log" 2>&1
    rc1=$?
    wait $p0
    rc0=$?
    stopFabric
    printf "%-28s %-8s rc0=%d rc1=%d %5.1fs  %s | %s\n" "$c" "$fname" $rc0 $rc1 "$(awk "BEGIN{print $(date +%s.%N)-$t0}")" \
      "$(tail -1 "$R/$tag.r0.txt" 2>/dev/null)" "$(tail -1 "$R/$tag.r1.txt" 2>/dev/null)"
    [ -s "$R/$tag.fabric.json" ] && echo "  fabric server: $(cat "$R/$tag.fabric.json")"
    if [ $rc0 -ne 0 ] || [ $rc1 -ne 0 ]; then grep -hE 'ginhw|ginexec|WARN' "$R/$tag.r0.log" "$R/$tag.r1.log" | head -20; fi
  done
done < "$FABRICS"
# NCCL's default of four GIN contexts: four collComms, four segments.
if [ -f "$CASES/put_signal.ops" ]; then
  tag=put_signal.ctx4
  rm -f "$B/id.$tag"*
  env "${COMMON[@]}" NCCL_GIN_NCONTEXTS=4 GINHW_FABRIC=zero NCCL_HOSTID=hostA \
    timeout -k 5 45 "$B/bin/ginexec" 0 2 "$B/id.$tag" "$CASES/put_signal.ops" "$R/$tag.r0.txt" > "$R/$tag.r0.log" 2>&1 &
  p0=$!
  env "${COMMON[@]}" NCCL_GIN_NCONTEXTS=4 GINHW_FABRIC=zero NCCL_HOSTID=hostB \
    timeout -k 5 45 "$B/bin/ginexec" 1 2 "$B/id.$tag" "$CASES/put_signal.ops" "$R/$tag.r1.txt" > "$R/$tag.r1.log" 2>&1
  rc1=$?
  wait $p0
  echo "put_signal, 4 GIN contexts: rc0=$? rc1=$rc1; $(grep -c 'connect: coll' "$R/$tag.r0.log") collComms on rank 0; $(tail -1 "$R/$tag.r1.txt")"
fi

# A peer killed mid-run (CASES/kill/*.ops, lowered from testdata/kill):
# rank 1 is killed while it sleeps in its kernel; rank 0 then posts to it
# and must end with the plugin's error, within its bounds, not hang.
for ops in "$CASES"/kill/*.ops; do
  [ -f "$ops" ] || continue
  tag=$(basename "$ops" .ops).zero
  rm -f "$B/id.$tag"*
  KILLENV=(GINHW_KERNEL_S=5 GINHW_BARRIER_S=5 GINHW_FABRIC=zero GINHW_TRACE="$R/$tag.trace")
  env "${COMMON[@]}" "${KILLENV[@]}" NCCL_HOSTID=hostA \
    timeout -k 5 45 "$B/bin/ginexec" 0 2 "$B/id.$tag" "$ops" "$R/$tag.r0.txt" > "$R/$tag.r0.log" 2>&1 &
  p0=$!
  env "${COMMON[@]}" "${KILLENV[@]}" NCCL_HOSTID=hostB \
    timeout -k 5 45 "$B/bin/ginexec" 1 2 "$B/id.$tag" "$ops" "$R/$tag.r1.txt" > "$R/$tag.r1.log" 2>&1 &
  p1=$!
  for _ in $(seq 400); do [ -f "$B/id.$tag.launch.1" ] && break; sleep 0.05; done
  sleep 0.3
  kill -9 $(pgrep -P $p1) $p1  # the executor under timeout, then timeout
  t0=$(date +%s.%N)
  wait $p0
  rc0=$?
  echo "peer killed ($tag): rank 0 rc=$rc0, ended $(awk "BEGIN{print $(date +%s.%N)-$t0}") s after the kill; its words:"
  grep -hE 'ginhw|ginexec' "$R/$tag.r0.log" | grep -vE 'fabric|connect:|using GPU' | head -8
  tail -3 "$R/$tag.r0.txt"
done
tar -C "$B" -czf "$OUTD/results.tgz" results
echo "== done"
