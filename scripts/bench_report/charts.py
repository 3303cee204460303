"""Rows -> PNG charts (bandwidth per shape, thread scaling), when matplotlib is importable
(Debian: python3-matplotlib, run with /usr/bin/python3)."""
import math
import os

from .parse import shape_text
from .render import OP_TITLES


def charts(rows, impls_by_op, out_dir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return [], "matplotlib is not installed (Debian: python3-matplotlib); no charts"
    files = []
    colors = {"simdnorm": "#1f77b4", "onednn": "#ff7f0e", "torch": "#2ca02c",
              "torch_avx512": "#98df8a"}
    for op, impls in impls_by_op.items():
        op_rows = [r for r in rows if r["op"] == op]
        threads = sorted({r["threads"] for r in op_rows})
        # Bandwidth per shape, one panel per thread count.
        fig, axes = plt.subplots(len(threads), 1, figsize=(max(8, 0.6 * len(op_rows) / len(threads) + 3),
                                                          4.4 * len(threads)), squeeze=False)
        for ax, t in zip(axes[:, 0], threads):
            rs = [r for r in op_rows if r["threads"] == t]
            labels = ["%s %s%s" % (shape_text(op, r["params"]),
                                   "" if r["layout"] == "rows" else r["layout"] + " ",
                                   r["regime"]) for r in rs]
            n = len(impls)
            w = 0.8 / n
            for j, impl in enumerate(impls):
                xs = [i + (j - (n - 1) / 2) * w for i in range(len(rs))]
                ys = [r["impl"].get(impl, 0) for r in rs]
                bars = ax.bar(xs, ys, w, label=impl, color=colors.get(impl))
                for bar, r in zip(bars, rs):  # disturbed cells hatched
                    if impl in r["disturbed"]:
                        bar.set_hatch("///")
                        bar.set_edgecolor("white")
            ax.scatter(range(len(rs)), [r["copy"] or 0 for r in rs], marker="_", s=400,
                       color="black", label="copy limit", zorder=3)
            ax.set_xticks(range(len(rs)))
            ax.set_xticklabels(labels, fontsize=7, rotation=35, ha="right")
            ax.set_yscale("log")
            ax.set_ylabel("GB/s (x read + y written)")
            ax.set_title("%s, %d thread%s (hatched: disturbed repetitions)" % (
                OP_TITLES.get(op, op), t, "" if t == 1 else "s"), fontsize=10)
            ax.grid(axis="y", which="both", alpha=0.3)
            from matplotlib.patches import Patch
            from matplotlib.lines import Line2D
            handles = [Patch(color=colors.get(i, "gray"), label=i) for i in impls]
            handles.append(Line2D([], [], color="black", linewidth=2, label="copy limit"))
            ax.legend(handles=handles, fontsize=7, ncol=len(impls) + 1)
        fig.tight_layout()
        name = "bw_%s.png" % op
        fig.savefig(os.path.join(out_dir, name), dpi=110)
        plt.close(fig)
        files.append((op, "bandwidth per shape", name))
        # Thread scaling: geometric mean over the shapes of each regime.
        if len(threads) > 1:
            regimes = sorted({r["regime"] for r in op_rows})
            fig, axes = plt.subplots(1, len(regimes), figsize=(5 * len(regimes), 3.6),
                                     squeeze=False)
            for ax, reg in zip(axes[0], regimes):
                for impl in impls + ["copy limit"]:
                    ys = []
                    for t in threads:
                        vals = [(r["copy"] if impl == "copy limit" else r["impl"].get(impl))
                                for r in op_rows if r["threads"] == t and r["regime"] == reg]
                        vals = [v for v in vals if v]
                        ys.append(math.exp(sum(map(math.log, vals)) / len(vals)) if vals else None)
                    if any(y is not None for y in ys):
                        ax.plot(threads, [y if y is not None else float("nan") for y in ys],
                                marker="o", label=impl,
                                color="black" if impl == "copy limit" else colors.get(impl),
                                linestyle="--" if impl == "copy limit" else "-")
                ax.set_xticks(threads)
                ax.set_xlabel("threads")
                ax.set_ylabel("GB/s, geometric mean over shapes")
                ax.set_title("%s, %s" % (OP_TITLES.get(op, op), reg), fontsize=9)
                ax.grid(alpha=0.3)
                ax.legend(fontsize=7)
            fig.tight_layout()
            name = "threads_%s.png" % op
            fig.savefig(os.path.join(out_dir, name), dpi=110)
            plt.close(fig)
            files.append((op, "thread scaling", name))
    return files, None
