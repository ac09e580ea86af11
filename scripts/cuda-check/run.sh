#!/bin/bash
# On the GPU machine (CUDA toolkit, CMake, ninja; nothing fetched): the platform addon with VOXD_CUDA=ON, then the
# smoke test. Needs build/cuda-check from scripts/cuda-check/prepare.mjs and node_modules/node-addon-api.
# CUDA_ARCHITECTURES (default 90, the H100's) narrows the kernels compiled; logs go to $OUT when it is set.
# PARAKEET=1 then measures Parakeet on the GPU (scripts/cuda-check/parakeet.mjs) on the realistic-size random model.
set -eo pipefail
D=$PWD/build/cuda-check
LOGS=${OUT:-/tmp}
mkdir -p /tmp/voxd-node && tar xJf "$D/node.tar.xz" -C /tmp/voxd-node && export PATH=$(dirname "$(find /tmp/voxd-node -name node -type f | head -1)"):$PATH
tar xJf "$D/sources.tar.xz" && tar xJf "$D/bundled.tar.xz"
# the random Whisper test model takes its vocabulary from ../shared (scripts/make-whisper-test-model.mjs)
mkdir -p ../shared/models/whisper-format && cp "$D/for-tests-ggml-tiny.en.bin" ../shared/models/whisper-format/
echo "node $(node --version); $(nvcc --version | tail -1); $(cmake --version | head -1); $(nproc) cores; $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
started=$(date +%s)
cmake -S . -B /tmp/voxd-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DVOXD_CUDA=ON -DVOXD_PORTABLE=ON \
  -DVOXD_BUNDLED_DEPS="$PWD/build/bundled/prefix" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHITECTURES:-90}" \
  -DCMAKE_JS_INC="$D/node-include" -DVOXD_VERSION="$(node -p "require('./package.json').version")" > "$LOGS/configure.log" 2>&1 ||
  { tail -40 "$LOGS/configure.log"; exit 1; }
cmake --build /tmp/voxd-cuda --target voxd -j "$(nproc)" > "$LOGS/build.log" 2>&1 || { grep -m5 -A12 "FAILED" "$LOGS/build.log"; exit 1; }
echo "configured and built in $(($(date +%s) - started)) s"
strip /tmp/voxd-cuda/voxd.node && ls -la /tmp/voxd-cuda/voxd.node && ldd /tmp/voxd-cuda/voxd.node
node scripts/make-whisper-test-model.mjs --size tiny --en --out /tmp/voxd-tiny.en.bin > /dev/null
node scripts/cuda-check/smoke.mjs /tmp/voxd-cuda/voxd.node /tmp/voxd-tiny.en.bin "$D/jfk.wav"
if [ "${PARAKEET:-0}" = 1 ]; then
  node scripts/make-parakeet-test-model.mjs --size realistic --out /tmp/voxd-parakeet.bin > /dev/null
  node scripts/cuda-check/parakeet.mjs /tmp/voxd-cuda/voxd.node /tmp/voxd-parakeet.bin "$D/jfk.wav"
fi
