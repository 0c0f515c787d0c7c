#!/usr/bin/env bash
# Session 13 call 3: the fp8 forward's exponentials in half precision (A/B), and where the fp8 hdim 128 forward's time goes: ncu --set full of the fp8 kernel
# and of the bf16 kernel (same harness, 8k dense: launch 9 is the first fp8 one at 8k, 9 + 73 the
# first bf16 one) and of the V transpose; pipe utilisation printed. BIN=<.ab binary> (fp8d128).
# usage: OUT=/some/dir [BIN=fp8d128] bench/gpu-s13b.sh   (.carry and .ab carried)
set -uo pipefail
. "$(dirname "$0")/gpu_prelude.sh"
bin=${BIN:-fp8d128}
prof() {  # $1 name, $2 kernel regex, $3 launches to skip
  stamp "ncu $1"
  timeout 150 ncu --set full -k regex:"$2" --launch-skip "$3" -c 1 -o "$log/$1" .ab/$bin $bin 8192 \
    >"$log/ncu-$1.txt" 2>&1
  stamp "rc=$?"
  ncu -i "$log/$1.ncu-rep" --page raw >"$log/$1-raw.txt" 2>&1
  grep -E "pipe_(xu|fma|alu|fmaheavy|fp16|tensor|uniform|shared)[a-z_]*\.(avg|sum)\.pct_of_peak_sustained_active|inst_executed_pipe_(xu|fma|alu|fp16)\.sum " "$log/$1-raw.txt" | head -30
  ncu_unpack "$1"
  grep -E "Duration|Pipe|pipe|Issue Slots|Executed Ipc|Warp Cycles Per Issued|Stall|Registers|Theoretical Occ|Memory Throughput|DRAM Throughput" \
    "$log/$1-details.txt" | head -40
}
for v in fp8d128h fp8d128 fp8d128h fp8d128; do  # the half-precision exponentials' A/B, interleaved
  stamp "$v"
  timeout 100 .ab/$v $v 4096 8192 16384 >>"$log/ab-$v.txt" 2>&1
  stamp "rc=$?"
done
grep -h check "$log"/ab-fp8d128h.txt | sort | uniq | head -8
grep -hE "^fp8d128h? d" "$log"/ab-*.txt | sort -k3,4 | tee "$log/table.txt"
prof fp8 run_kernel_sm90 8
prof bf16 run_kernel_sm90 81
prof transpose transpose_v_fp8 8
cp "$log/table.txt" "$out/table.txt"
(cd "$out" && tar czf logs.tgz t && rm -rf t)
