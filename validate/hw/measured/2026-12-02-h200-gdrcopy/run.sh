#!/bin/bash
# GDRCopy experiment: the same GIN proxy programs with NCCL's default
# (NCCL_GDRCOPY_ENABLE=0: cis and counters in host memory) and with
# NCCL_GDRCOPY_ENABLE=1 (if gdrdrv is loaded: GPU memory behind GDRCopy).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
B=$(mktemp -d); R=$OUT/res; mkdir -p "$R"
bash "$ROOT/validate/hw/native/build.sh" "$B/bin" > "$R/build.log" 2>&1 || { tail -20 "$R/build.log"; exit 1; }
lsmod 2>/dev/null | grep -i gdr > "$R/gdrdrv.txt"; ls -l /dev/gdrdrv >> "$R/gdrdrv.txt" 2>&1
ldconfig -p | grep -i gdrapi >> "$R/gdrdrv.txt"
COMMON=(NCCL_NVLS_ENABLE=0 NCCL_IB_DISABLE=1 NCCL_MNNVL_ENABLE=0 NCCL_GIN_TYPE=2 NCCL_GIN_NCONTEXTS=1
        NCCL_NET_PLUGIN=$B/bin/libnccl-net-ginhw.so NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET GINHW_WAIT_MS=2000 GINHW_KERNEL_S=20)
for mode in default gdr1; do
  extra=(); [ $mode = gdr1 ] && extra=(NCCL_GDRCOPY_ENABLE=1)
  for ops in "$HERE"/*.ops; do
    c=$(basename "$ops" .ops); tag=$c.$mode
    env "${COMMON[@]}" "${extra[@]}" GINHW_FABRIC=zero NCCL_HOSTID=hostA timeout -k 5 45 "$B/bin/ginexec" 0 2 "$B/id.$tag" "$ops" "$R/$tag.r0.txt" > "$R/$tag.r0.log" 2>&1 &
    p0=$!
    env "${COMMON[@]}" "${extra[@]}" GINHW_FABRIC=zero NCCL_HOSTID=hostB timeout -k 5 45 "$B/bin/ginexec" 1 2 "$B/id.$tag" "$ops" "$R/$tag.r1.txt" > "$R/$tag.r1.log" 2>&1
    rc1=$?; wait $p0; rc0=$?
    echo "$tag rc0=$rc0 rc1=$rc1 $(grep -ihE 'gdrcopy|gdr' "$R/$tag.r0.log" | head -3 | tr '\n' '|')"
  done
done
cd "$OUT" && tar czf results.tgz res && rm -rf res
