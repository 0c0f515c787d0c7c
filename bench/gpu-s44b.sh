#!/usr/bin/env bash
# Session 44's issue-8 table on main as it stands (no kernel change since session 43): the library
# built on the device (a two-GPU machine's 32 cores, 280-350 s), then bench/attention.py under the
# sustained protocol on GPU 0 (flashkit, cuDNN and the FP8 forward; hdim 128, 64, 256; 2k-16k)
# while GPU 1 runs the gtest binary's tests in order until the call's time runs out (call 5 got
# through 45 of them).
# usage: OUT=/some/dir bench/gpu-s44b.sh   (carry: .carry: cutlass/include, googletest)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv,noheader | tee "$log/gpu.txt"
device_build || exit 1
stamp "GPU 1: every gtest (background)"
(CUDA_VISIBLE_DEVICES=1 timeout $(( $(left) - 20 )) build-gpu/flashkit_gpu_tests >"$log/tests.log" 2>&1
 echo "rc=$?" >>"$log/tests.log") &
stamp "GPU 0: bench/attention.py --protocol sustained ($(left) s left)"
CUDA_VISIBLE_DEVICES=0 timeout "$(( $(left) - 15 ))" python3 bench/attention.py --out "$out" --protocol sustained \
  --methods ${METHODS:-flashkit,cudnn,flashkit-fp8} --no-memory --hdims ${HDIMS:-128,64,256} \
  --seqlens 2048,4096,8192,16384 --name ${NAME:-attention-s44-sustained} >"$log/sus.log" 2>&1
stamp "rc=$?"
wait
grep -E "^\[  FAILED|^\[  PASSED|tests ran|rc=" "$log/tests.log" | tail -6
grep -v Warn "$log/sus.log" | tail -42
(cd "$out" && tar czf logs.tgz t)
