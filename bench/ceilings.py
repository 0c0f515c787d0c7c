"""Measures the device's two ceilings (METHOD.md): device-to-device copy bandwidth (bytes read +
written) and a large bf16 matrix product's TFLOP/s, on random data. Writes <out>/ceilings.json;
bench scripts quote their numbers against these."""
import argparse
import json
import os

import torch

from timing import median_ms


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=".")
    args = p.parse_args()
    n = 1 << 30  # 2 GiB of bf16 per buffer: far beyond L2
    src = torch.randn(n, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), 20, 3)
    copy_tbs = 2 * n * 2 / ms / 1e9
    m = 8192
    a = torch.randn(m, m, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(m, m, dtype=torch.bfloat16, device="cuda")
    ms_mm = median_ms(lambda: a @ b, 20, 3)
    tflops = 2 * m**3 / ms_mm / 1e9
    res = {"gpu": torch.cuda.get_device_name(), "copy_TBps": round(copy_tbs, 3),
           "bf16_matmul_TFLOPs": round(tflops, 1), "torch": torch.__version__}
    print(json.dumps(res))
    with open(os.path.join(args.out, "ceilings.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
