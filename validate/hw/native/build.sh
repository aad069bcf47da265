#!/bin/bash
# Builds ginsim's NCCL plugin (libnccl-net-ginhw.so, plain C, CUDA loaded at
# run time) and the executor (ginexec, nvcc against the NCCL wheel's 2.28.9
# headers) into DIR. Run on the GPU machine: bash validate/hw/native/build.sh DIR
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
B=${1:?usage: build.sh DIR}
mkdir -p "$B"
NC=${NCCL_HOME:-$(python3 -c 'import nvidia.nccl;print(list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)}
[ -z "$NC" ] && NC=$(find / -name 'libnccl.so.2' -path '*nvidia/nccl*' 2>/dev/null | head -1 | xargs -r dirname | xargs -r dirname)
if [ -z "$NC" ] || [ ! -f "$NC/include/nccl_device.h" ]; then
  echo "build.sh: no NCCL with device headers (set NCCL_HOME to the nvidia-nccl-cu13 wheel's nvidia/nccl)" >&2
  exit 2
fi
grep -qE '#define NCCL_MINOR 28' "$NC/include/nccl.h" || echo "build.sh: warning: $NC is not NCCL 2.28; the plugin implements GIN v11 for 2.28.9" >&2
echo "$NC" > "$B/nccl_home"
gcc -O2 -g -Wall -Wextra -Werror -std=c11 -shared -fPIC -o "$B/libnccl-net-ginhw.so" "$HERE/ginhw.c" -lpthread -ldl
gcc -O2 -g -Wall -Wextra -Werror -std=c11 -o "$B/ginhw_test" "$HERE/ginhw_test.c" -ldl -lpthread
NV=(nvcc -std=c++17 -O2 -arch=sm_90 -o "$B/ginexec" "$HERE/ginexec.cu" -I"$NC/include" -L"$NC/lib" -l:libnccl.so.2
    -Xlinker -rpath="$NC/lib")
if ! "${NV[@]}" -DGINHW_BARRIER 2> "$B/nvcc-barrier.log"; then
  echo "build.sh: the executor did not build with GIN barriers; building without them (barrier ops report 'not built'):" >&2
  head -20 "$B/nvcc-barrier.log" >&2
  "${NV[@]}"
fi
echo "built into $B against $(grep -E '#define NCCL_(MAJOR|MINOR|PATCH) ' "$NC/include/nccl.h" | awk '{printf "%s.", $3}')"
