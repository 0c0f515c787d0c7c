#!/usr/bin/env bash
# One GPU call for decode v6 (bench/NOTES-decode.md, "v6"): builds the minimal kernel set, runs the
# decode GPU tests (every schedule incl. flash_decoding; sanitizers on DecodeGpuSmall*), then the
# quick decode sweep with the head-major layout and the A/B knobs as extra columns, all in ONE
# process on the same inputs (bench/decode.py --variants). Run from the repo root with .carry
# linked; leaves <= 4 files under $OUT. About 220 s build + 60 s tests + 20 s Python decode tests
# with torch (CUDA-graph capture of every schedule) + 90 s bench.
set -uo pipefail
out=${OUT:?set OUT}
tests/gpu/run --kernels minimal --filter 'DecodeGpu*' --sanitize-filter 'DecodeGpuSmall*' --out "$out/t"
E=FLASHKIT_DECODE_EVICT_FIRST R=FLASHKIT_DECODE_SPLIT_RULE O=FLASHKIT_DECODE_SPLIT_ORDER
P=FLASHKIT_DECODE_L2_PROMO F=FLASHKIT_DECODE_L2_PREFETCH
PYTHONPATH=python timeout 60 python3 -m pytest -q -k "dense_and_paged or cuda_graph" \
  tests/python/test_torch_decode.py > "$out/t/pytest.log" 2>&1; tail -2 "$out/t/pytest.log"
v="split_kv@$E=0,lean@$E=0,split_kv@$R=wave+$O=1,split_kv@$O=1,split_kv@$R=wave"
v="$v,split_kv@$P=128,split_kv@$P=0,cudnn@flush=read,split_kv@flush=read,split_kv@$E=0+flush=read"
v="$v,split_kv@$F=2,split_kv@$F=4,lean@$F=4,split_kv@$R=wave+$O=1+$F=4"
PYTHONPATH=python PYTHONUNBUFFERED=1 timeout 170 python3 bench/decode.py --out "$out" --quick \
  --headmajor --variants "$v" > "$out/decode-quick.log" 2>&1
grep -E "^d(64|128) " "$out/decode-quick.log" | cut -c1-900
cd "$out" && tar czf logs.tgz t/*.log t/*.txt t/*.json decode-quick.log 2>/dev/null \
  && rm -rf t decode-quick.log && ls
