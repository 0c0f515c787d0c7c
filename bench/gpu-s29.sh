#!/usr/bin/env bash
# Session 29's GPU calls (bench/NOTES-attention.md, session 29). The library comes built from the
# CPU machine in .ab/lib.tgz (bench/gpu-library.sh says how).
# PART=probe: hdim 256 backward, flashkit's kernels' timelines (bench/bwd_tail.py) at 2k-16k dense
#   and causal, and cuDNN's kernels (bench/kernel_breakdown.py) at the same shapes.
# PART=clock: bench/clock_probe.py (SM clock, power, temperature under back-to-back calls),
#   flashkit and cuDNN alternating, for the bars' backward and forward cells.
# PART=sustained: bench/attention.py --protocol sustained (METHODS, HDIMS, NAME).
# PART=sm80: issue 3's sm80-class path against torch flash, sustained then burst protocol.
# PART=burst: the same table under the burst protocol (BNAME names it).
# PART=variants: bench/variants.py under the sustained protocol (hdim 128, 64), then burst.
# Calls (one H200 each): 1 PART=probe, 2 PART=clock, 3 PART=sustained, 4 PART=sm80, 5 PART="sustained
# burst" (NAME=attention-s29-sustained-r2), 6 PART=burst HDIMS=128,256 BNAME=attention-s29-burst-clocks,
# 7 PART=variants, 8 bench/variants.py --hdim 128 --protocol sustained alone, 9 attention.py --quick
# and a one-shape sustained run (the refactored scripts).
# usage: tar xzf .ab/lib.tgz && OUT=/some/dir PART=probe bench/gpu-s29.sh
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
carried_library
export PYTHONPATH=bench:$PYTHONPATH
for part in ${PART:?set PART}; do
  case "$part" in
  probe)
    stamp "bwd_tail d256"
    timeout 200 python3 bench/bwd_tail.py ${SHAPES:-256:2048 256:4096 256:8192 256:16384 256:2048:causal \
      256:4096:causal 256:8192:causal 256:16384:causal} >"$log/tail.log" 2>&1
    stamp "rc=$?"
    grep -E "^d|run_kernel|preprocess|convert" "$log/tail.log" | cut -c1-110
    for s in 2048 8192; do
      for c in "" --causal; do
        timeout 60 python3 bench/kernel_breakdown.py --backend cudnn --hdim 256 --seqlen $s $c \
          >"$log/cudnn-$s$c.log" 2>&1
        head -5 "$log/cudnn-$s$c.log" | cut -c1-120
      done
    done
    ;;
  clock)
    for spec in "128 4096 bwd" "128 2048 bwd" "128 8192 bwd" "128 8192 fwd" "64 4096 bwd" "256 8192 bwd --causal"; do
      set -- $spec
      timeout 90 python3 bench/clock_probe.py --hdim $1 --seqlen $2 --pass $3 ${4:-} \
        --methods flashkit,cudnn,flashkit,cudnn --seconds ${SECONDS_EACH:-3} 2>&1 | grep -v Warn
    done
    ;;
  sustained)  # issue 8's table under the sustained protocol (and the fp8 forward beside it)
    stamp "bench/attention.py --protocol sustained ($(left) s left)"
    timeout "$(( $(left) - 5 ))" python3 bench/attention.py --out "$out" --protocol sustained \
      --methods ${METHODS:-flashkit,cudnn,flash,flashkit-fp8} --no-memory --hdims ${HDIMS:-128,64,256} \
      --seqlens 2048,4096,8192,16384 --name ${NAME:-attention-s29-sustained} >"$log/sus.log" 2>&1
    stamp "rc=$?"
    grep -v Warn "$log/sus.log" | tail -40
    ;;
  burst)  # issue 8's table under the burst protocol (the default), same methods
    stamp "bench/attention.py burst ($(left) s left)"
    timeout "$(( $(left) - 5 ))" python3 bench/attention.py --out "$out" --methods flashkit,cudnn,flash \
      --no-memory --hdims ${HDIMS:-128,64,256} --seqlens 2048,4096,8192,16384 \
      --name ${BNAME:-attention-s29-burst} >"$log/burst.log" 2>&1
    stamp "rc=$?"
    grep -v Warn "$log/burst.log" | tail -8
    ;;
  variants)  # issue 6: each variant's cost over plain, sustained (hdim 128, 64) then burst (128)
    for d in 128 64; do
      stamp "variants d$d sustained ($(left) s left)"
      timeout 150 python3 bench/variants.py --out "$out/vs$d" --hdim $d --protocol sustained \
        >"$log/var-sus-$d.log" 2>&1
      stamp "rc=$?"
      grep -v Warn "$log/var-sus-$d.log" | tail -17
    done
    stamp "variants d128 burst ($(left) s left)"
    timeout "$(( $(left) - 5 ))" python3 bench/variants.py --out "$out/vb128" --hdim 128 \
      >"$log/var-burst.log" 2>&1
    stamp "rc=$?"
    grep -v Warn "$log/var-burst.log" | tail -17
    ;;
  sm80)  # issue 3: the sm80-class path against FA2, sustained then burst, hdim 64 / 128
    stamp "sm80 sustained ($(left) s left)"
    timeout 300 python3 bench/attention.py --out "$out" --protocol sustained --methods flashkit-sm80,flash \
      --no-memory --hdims 128,64 --seqlens 2048,4096,8192,16384 --name attention-sm80-s29-sustained \
      >"$log/sm80-sus.log" 2>&1
    stamp "rc=$?"
    grep -v Warn "$log/sm80-sus.log" | tail -20
    stamp "sm80 burst ($(left) s left)"
    timeout "$(( $(left) - 5 ))" python3 bench/attention.py --out "$out" --methods flashkit-sm80,flash \
      --no-memory --hdims 128,64 --seqlens 2048,4096,8192,16384 --name attention-sm80-s29-burst \
      >"$log/sm80-burst.log" 2>&1
    stamp "rc=$?"
    grep -v Warn "$log/sm80-burst.log" | tail -12
    ;;
  esac
done
stamp "done"
