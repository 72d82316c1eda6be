#!/usr/bin/env bash
# gpumem GPU check: runs gpumem's caching allocator on a real NVIDIA GPU through the CUDA driver and prints
# the device, reserved bytes against cuMemGetInfo through a training-like workload (native and expandable
# segments), expandable segments growing and being returned, and the cost of cuMemAlloc+cuMemFree against a
# cached malloc+free. Needs only a JDK 25+ and the built project (no Maven, no CUDA toolkit). Takes well
# under 3 minutes; it is stopped after 170 s.
#
#   scripts/gpu-check.sh [--device N] [--budget-mib M] [--seed S]
#
# The driver library is libcuda.so.1 unless GPUMEM_CUDA_LIBRARY names another (the tests' fake driver, for
# a dry run: GPUMEM_CUDA_LIBRARY=gpumem-cuda/target/test-classes/native/libfakecuda.so scripts/gpu-check.sh).
# Exit status: 0 pass, 1 something did not add up, 2 no usable driver, 124 timed out.
set -euo pipefail
root=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
. "$root/scripts/jdk.sh"
gpumem_find_jdk || exit 2

classes="$root/gpumem-core/target/classes:$root/gpumem-cuda/target/classes"
if [ -f "$root/gpumem-cuda/target/classes/io/gpumem/cuda/check/GpuCheck.class" ] \
   && [ -d "$root/gpumem-core/target/classes/io/gpumem/alloc" ]; then
  cp=$classes
elif [ -f "$root/gpumem-cli/target/gpumem.jar" ]; then
  cp="$root/gpumem-cli/target/gpumem.jar"
else
  echo "gpu-check: the project is not built; run './gpumem --help' (or mvn -DskipTests package) first" >&2
  exit 2
fi

props=()
if [ -n "${GPUMEM_CUDA_LIBRARY:-}" ]; then
  props+=("-Dgpumem.cuda.library=$GPUMEM_CUDA_LIBRARY")
fi
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv || true
exec timeout 170 "$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED "${props[@]}" \
  -cp "$cp" io.gpumem.cuda.check.GpuCheck "$@"
