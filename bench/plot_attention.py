"""PNG plots of bench/attention.py's JSON in the style of the FlashAttention-2 paper's Figs. 4-6:
one figure per pass (forward, backward, forward+backward), a panel per (hdim, causal), grouped bars
of TFLOP/s per seqlen and method; plus peak memory of forward+backward vs seqlen.
usage: python3 bench/plot_attention.py RESULTS.json [OUT_DIR]"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

METHODS = ["math", "efficient", "flash", "cudnn", "flashkit-sm80", "flashkit"]
COLORS = {"math": "#999999", "efficient": "#6baed6", "flash": "#fd8d3c", "cudnn": "#74c476",
          "flashkit-sm80": "#fc9272", "flashkit": "#d62728"}
LABELS = {"math": "PyTorch math", "efficient": "SDPA efficient", "flash": "SDPA flash (FA2)",
          "cudnn": "SDPA cuDNN", "flashkit-sm80": "flashkit (sm80-class kernels)", "flashkit": "flashkit"}


def plot(path, out_dir):
    res = json.load(open(path))
    stem = os.path.splitext(os.path.basename(path))[0]
    speed = [r for r in res["speed"] if "fwd_tflops" in r]
    hdims = sorted({r["hdim"] for r in speed})
    seqlens = sorted({r["seqlen"] for r in speed})
    methods = [m for m in METHODS if any(r["method"] == m for r in speed)]
    for pas, title in (("fwd", "forward"), ("bwd", "backward"), ("fwd_bwd", "forward + backward")):
        if not any(f"{pas}_tflops" in r for r in speed):
            continue  # a --fwd-only run
        fig, axes = plt.subplots(2, len(hdims), figsize=(5 * len(hdims), 7), squeeze=False)
        for ci, causal in enumerate((False, True)):
            for hi, d in enumerate(hdims):
                ax = axes[ci][hi]
                w = 0.8 / len(methods)
                for mi, m in enumerate(methods):
                    ys = []
                    for s in seqlens:
                        r = next((r for r in speed if r["method"] == m and r["hdim"] == d
                                  and r["causal"] == causal and r["seqlen"] == s), None)
                        ys.append(r.get(f"{pas}_tflops", 0) if r else 0)
                    xs = [i + (mi - (len(methods) - 1) / 2) * w for i in range(len(seqlens))]
                    bars = ax.bar(xs, ys, w, color=COLORS[m], label=LABELS[m])
                    if m in ("flashkit", "flashkit-sm80"):
                        for b, y in zip(bars, ys):
                            if y:
                                ax.text(b.get_x() + w / 2, y, f"{y:.0f}", ha="center", va="bottom", fontsize=6)
                ax.set_xticks(range(len(seqlens)))
                ax.set_xticklabels([f"{s // 1024}k" if s >= 1024 else str(s) for s in seqlens])
                ax.set_title(f"{title}, {'causal' if causal else 'no mask'}, head dim {d}", fontsize=9)
                ax.set_xlabel("sequence length")
                ax.set_ylabel("TFLOP/s")
        axes[0][0].legend(fontsize=7)
        fig.suptitle(f"Attention {title} speed on {res['gpu']}\n(bf16, batch*seqlen=16k, hidden 2048; "
                     f"{res.get('protocol', 'burst')} timing)", fontsize=10)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, f"{stem}-{pas}.png"), dpi=110)
        plt.close(fig)
    mem = [r for r in res.get("memory", []) if "peak_bytes" in r]
    if mem:
        fig, ax = plt.subplots(figsize=(6, 4))
        for m in ("math", "flashkit"):
            pts = sorted((r["seqlen"], r["peak_bytes"] / 2**30) for r in mem if r["method"] == m)
            if pts:
                ax.plot(*zip(*pts), "o-", color=COLORS[m], label=LABELS[m])
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length (batch*seqlen = 16k, hdim 128, 16 heads)")
        ax.set_ylabel("peak extra memory, fwd+bwd (GiB)")
        ax.set_title(f"Memory on {res['gpu']}")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, f"{stem}-memory.png"), dpi=110)
        plt.close(fig)


if __name__ == "__main__":
    plot(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(sys.argv[1]) or ".")
