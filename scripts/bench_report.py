#!/usr/bin/python3
"""Turns simdnorm_bench JSON runs and simdnorm_accuracy JSON into a report folder.

    bench_report.py --out DIR --bench a.json [b.json ...] --accuracy acc.json [acc2.json ...]
                    [--command "scripts/bench_report.sh ..."] [--wall-seconds N]

Writes DIR/README.md (bandwidth table per op, summary of where simdnorm loses, accuracy table)
and, when matplotlib is importable (Debian: python3-matplotlib, run with /usr/bin/python3),
DIR/bw_<op>.png (bandwidth per shape: simdnorm, each peer, the copy limit) and
DIR/threads_<op>.png (thread scaling). Standard library only, besides matplotlib.

Benchmark names are op/impl/params.../threads:T (simdnorm's impl is its ISA, e.g. avx512bw;
peers are onednn, torch, torch_avx512). Per benchmark the values are medians over the
repetitions of each repetition's GB/s (bytes / median op time), copy GB/s (best of the three
copies of the same bytes at the same thread count, interleaved with the op, writing where the
op writes, on the op's thread runtime) and their ratio. Implementations are compared by that
in-run ratio: sampled next to each other in time, the op and its copy see the same machine, so
the ratio holds on a noisy shared machine where GB/s taken minutes apart do not.
"""
import argparse
import datetime
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys

SIMDNORM_ISAS = {"scalar", "sse2", "sse4_2", "avx2_fma", "avx512bw", "neon64"}
PEER_ORDER = ["onednn", "torch", "torch_avx512"]
OP_TITLES = {
    "layer_norm": "LayerNorm forward",
    "layer_norm_single_mean": "LayerNorm forward with a single-float mean (prices the default hi + lo mean)",
    "rms_norm": "RMSNorm forward",
    "batch_norm_inference": "BatchNorm inference",
    "batch_norm_training": "BatchNorm training-mode forward (batch statistics)",
    "group_norm32": "GroupNorm(32) forward",
}
MiB = 1 << 20
# Cores' worth of run-queue waiting above which a repetition counts as disturbed.
RUNQ_LIMIT = 0.1
# simdnorm / best peer (ratio of ratios) at or above this, below 1: a tie, not a loss (the
# repeatability of a ratio on this kind of shared machine is a few per cent at best).
TIE = 0.95


def impl_order(name):
    if name == "simdnorm":
        return (0, name)
    if name in PEER_ORDER:
        return (1 + PEER_ORDER.index(name), name)
    return (10, name)


def parse_name(run_name):
    """op, impl, params (ordered list of (key, value)), threads."""
    parts = run_name.split("/")
    if parts and parts[-1] in ("manual_time", "real_time"):
        parts = parts[:-1]
    op, impl = parts[0], parts[1]
    params, threads = [], 1
    for p in parts[2:]:
        k, sep, v = p.partition(":")
        if k == "threads":
            threads = int(v)
        else:
            params.append((k, v) if sep else (None, p))  # bare tokens: layout, NxCxHxW
    return op, impl, tuple(params), threads


def dims_token(params):
    for k, v in params:
        if re.fullmatch(r"\d+(x\d+)+", v):
            return v
    return None


def x_bytes(op, params):
    """Bytes of x for the regime (cache / DRAM), from the parameters in the name."""
    d = dict(params)
    if "x_MiB" in d:
        return float(d["x_MiB"]) * MiB
    t = dims_token(params)
    if t:
        return 4.0 * math.prod(int(v) for v in t.split("x"))
    dims = [int(d[k]) for k in ("N", "C", "H", "W") if k in d]
    if len(dims) == 4:
        return 4.0 * math.prod(dims)
    return None


def shape_text(op, params):
    d = dict(params)
    if op in ("layer_norm", "layer_norm_single_mean", "rms_norm") and "D" in d and "x_MiB" in d:
        return "D=%s, x %s MiB" % (d["D"], d["x_MiB"])
    out = []
    for k, v in params:
        if k is None and v.lower() in ("nchw", "nhwc", "rows"):
            continue  # the layout column
        out.append(v if k is None else "%s=%s" % (k, v))
    return ", ".join(out)


def layout_of(params):
    d = dict((k, v) for k, v in params if k)
    for k in ("layout", "lay"):
        if k in d:
            return d[k]
    for _, v in params:
        if v.lower() in ("nchw", "nhwc", "rows"):
            return v.lower()
    return "rows"


class Cell:
    def __init__(self):
        self.gbps, self.copy, self.ratio, self.runq, self.errors = [], [], [], [], []
        self.labels, self.diff, self.differs = set(), None, False


def load_bench(paths):
    cells = {}  # (op, params, threads) -> impl -> Cell
    contexts = []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        contexts.append(data.get("context", {}))
        for b in data.get("benchmarks", []):
            if b.get("run_type") == "aggregate":
                continue
            op, impl, params, threads = parse_name(b.get("run_name", b["name"]))
            if impl in SIMDNORM_ISAS:
                impl_name = "simdnorm"
            else:
                impl_name = impl
            c = cells.setdefault((op, params, threads), {}).setdefault(impl_name, Cell())
            if impl_name == "simdnorm":
                c.labels.add(impl)
            if b.get("error_occurred"):
                c.errors.append(b.get("error_message", "error"))
                continue
            if "GBps" in b:
                c.gbps.append(b["GBps"])
                c.copy.append(b.get("copy_GBps", 0.0))
                c.ratio.append(b.get("ratio", 0.0))
                c.runq.append(b.get("runq_wait", 0.0))
            if b.get("label"):
                c.labels.add(b["label"])
            if "max_diff_vs_simdnorm" in b:
                c.diff = b["max_diff_vs_simdnorm"]
            if b.get("numerics_differ"):
                c.differs = True
    return cells, contexts


def med(v):
    return statistics.median(v) if v else None


def fmt_gbps(v):
    if v is None:
        return "-"
    return "%.3g" % v if v < 100 else "%.0f" % v


def summarize(cells):
    """rows: list of dicts per (op, params, threads) with per-impl GB/s and the copy limit."""
    rows = []
    for (op, params, threads), impls in cells.items():
        r = {"op": op, "params": params, "threads": threads, "impl": {}, "ratio": {},
             "copies": {}, "errors": {}, "labels": {}, "differs": {}, "disturbed": set(),
             "reps": {}}
        copies = []
        for name, c in impls.items():
            # Repetitions during which this process waited for a CPU (another process, or
            # oversubscription) are set aside when there are undisturbed ones.
            keep = [i for i, w in enumerate(c.runq) if w <= RUNQ_LIMIT]
            if not keep:
                keep = list(range(len(c.gbps)))
                if keep:
                    r["disturbed"].add(name)
            g = med([c.gbps[i] for i in keep])
            if g is not None:
                r["impl"][name] = g
                r["ratio"][name] = med([c.ratio[i] for i in keep])
                r["copies"][name] = med([c.copy[i] for i in keep])
                r["reps"][name] = (len(keep), len(c.gbps))
                copies.append(r["copies"][name])
            elif c.errors:
                r["errors"][name] = c.errors[0]
            r["labels"][name] = ", ".join(sorted(c.labels))
            if c.differs:
                r["differs"][name] = c.diff
        r["copy"] = med(copies)  # for display; each ratio uses its own benchmark's copy
        xb = x_bytes(op, params)
        r["x_bytes"] = xb
        r["regime"] = "?" if xb is None else ("DRAM" if xb >= 64 * MiB else "cache")
        r["layout"] = layout_of(params)
        rows.append(r)

    def key(r):
        d = dict(r["params"])
        def num(v):
            return [int(t) for t in re.findall(r"\d+", v)] or [0]
        return (r["op"], r["layout"], r["regime"] != "cache",
                [(num(v), v) for k, v in r["params"] if v.lower() not in ("nchw", "nhwc")],
                r["threads"])

    rows.sort(key=key)
    return rows


def bandwidth_tables(rows, impls_by_op):
    out = []
    for op in sorted({r["op"] for r in rows}, key=lambda o: list(OP_TITLES).index(o)
                     if o in OP_TITLES else 99):
        impls = impls_by_op[op]
        out.append("### %s\n" % OP_TITLES.get(op, op))
        head = ["layout", "shape", "regime", "threads", "copy limit GB/s"] + impls
        has_peer = any(i != "simdnorm" for i in impls)
        if has_peer and "simdnorm" in impls:
            head.append("simdnorm / best peer")
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---|" * len(head))
        for r in rows:
            if r["op"] != op:
                continue
            cells = [r["layout"], shape_text(op, r["params"]), r["regime"], str(r["threads"]),
                     fmt_gbps(r["copy"])]
            best = max(r["ratio"].values()) if r["ratio"] else None
            for i in impls:
                if i in r["impl"]:
                    g, q = r["impl"][i], r["ratio"][i]
                    t = "%s (%.2f)" % (fmt_gbps(g), q)
                    if i in r["differs"]:
                        t += " †"
                    if i in r["disturbed"]:
                        t += " ~"
                    if q == best and len(r["impl"]) > 1:
                        t = "**" + t + "**"
                    cells.append(t)
                elif i in r["errors"]:
                    e = r["errors"][i]
                    cells.append("mismatch" if "differs" in e else "n/a")
                else:
                    cells.append("-")
            if has_peer and "simdnorm" in impls:
                s = r["ratio"].get("simdnorm")
                peers = {k: v for k, v in r["ratio"].items() if k != "simdnorm"}
                if not s or not peers or not max(peers.values()):
                    cells.append("-")
                else:
                    bp = max(peers, key=peers.get)
                    x = s / peers[bp]
                    # ~: simdnorm's or that peer's repetitions were all disturbed.
                    shaky = "simdnorm" in r["disturbed"] or bp in r["disturbed"]
                    t = "%.2fx" % x + ("" if x >= 1 else " **loses to %s**" % bp if x < TIE
                                       else " (tie with %s)" % bp)
                    cells.append(t + (" ~" if shaky else ""))
            out.append("| " + " | ".join(cells) + " |")
        diffs = sorted({(k, v) for r in rows if r["op"] == op for k, v in r["differs"].items()},
                       key=lambda kv: -kv[1])
        used = {}
        for r in rows:
            if r["op"] == op:
                for k, lab in r["labels"].items():
                    if k != "simdnorm" and lab:
                        used.setdefault((k, lab), set()).add(r["layout"])
        if used:
            out.append("")
            out.append("Peer implementations that ran (oneDNN's own name, libtorch's CPU "
                       "capability): " + "; ".join("%s %s: %s" % (k, "/".join(sorted(l)), lab)
                                                   for (k, lab), l in sorted(used.items())) + ".")
        nd = sum(len(r["disturbed"]) for r in rows if r["op"] == op)
        if nd:
            out.append("")
            out.append("~ every repetition of this cell was disturbed (this process waited for a CPU "
                       "more than %.2f cores' worth: another process was running); the value is "
                       "the median of the disturbed ones (%d cells)." % (RUNQ_LIMIT, nd))
        if diffs:
            worst = {}
            for k, v in diffs:
                worst[k] = max(worst.get(k, 0), v)
            out.append("")
            out.append("† timed, but the output differs from simdnorm's by more than 1e-3 * (1 + |y|) "
                       "(largest |difference|: %s): float rounding in long reductions, see the "
                       "accuracy table." % ", ".join("%s %.2g" % kv for kv in sorted(worst.items())))
        out.append("")
    return out


def losses(rows, reliable=True):
    """Rows where a peer's ratio beats simdnorm's; reliable: both cells undisturbed."""
    lines = []
    for r in rows:
        s = r["ratio"].get("simdnorm")
        if s is None:
            continue
        for k, v in r["ratio"].items():
            ok = "simdnorm" not in r["disturbed"] and k not in r["disturbed"]
            if k != "simdnorm" and v > s and ok == reliable:
                lines.append((r["op"], r["layout"], shape_text(r["op"], r["params"]), r["regime"],
                              r["threads"], k, s, v, r["impl"]["simdnorm"], r["impl"][k]))
    return lines


def errors_list(rows):
    """One line per (op, implementation, message), with the cells it applies to."""
    by = {}
    for r in rows:
        for k, e in r["errors"].items():
            by.setdefault((r["op"], k, e), []).append(
                "%s %s t=%d" % (r["layout"], shape_text(r["op"], r["params"]), r["threads"]))
    out = []
    for (op, k, e), where in sorted(by.items()):
        n_op = sum(1 for r in rows if r["op"] == op)
        out.append("- %s, %s: %s (%s)" % (op, k, e, "every shape" if len(where) == n_op
                                          else "; ".join(where)))
    return out


def accuracy_table(paths):
    results = {}
    impls = []
    ctx = {}
    for p in paths:
        with open(p) as f:
            data = json.load(f)
        ctx.update(data.get("context", {}))
        for e in data.get("results", []):
            k = (e["op"], e["layout"], e["shape"], e["input"])
            results.setdefault(k, {})[e["impl"]] = e
            if e["impl"] not in impls and e["impl"] != "f32_floor":
                impls.append(e["impl"])
    impls.sort(key=impl_order)
    out = ["| op | layout | shape | input | f32 floor | " + " | ".join(impls) + " |",
           "|" + "---|" * (5 + len(impls))]

    def f(e):
        if e is None:
            return "-"
        v = e.get("max_abs_error")
        if v is None:
            return "n/a"
        t = "0" if v == 0 else "%.2g" % v
        return t + (" (non-finite!)" if e.get("note") == "non-finite outputs" else "")

    order = {"N(0,1)": 0, "1e4+N(0,1)": 1, "1e6+N(0,1)": 2}
    for k in sorted(results, key=lambda k: (k[0] != "layer_norm", k[0], k[1], k[2],
                                            order.get(k[3], 9))):
        r = results[k]
        out.append("| %s | %s | %s | %s | %s | " % (k[0], k[1], k[2], k[3], f(r.get("f32_floor")))
                   + " | ".join(f(r.get(i)) for i in impls) + " |")
    notes = sorted({"%s on %s: %s" % (i, k[0], e["note"]) for k, r in results.items()
                    for i, e in r.items() if e.get("max_abs_error") is None and e.get("note")})
    return out, notes


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    # ARM's /proc/cpuinfo has implementer and part numbers only; lscpu names the core.
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return platform.processor() or platform.machine()


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--bench", nargs="+", default=[])
    ap.add_argument("--accuracy", nargs="*", default=[])
    ap.add_argument("--command", default="")
    ap.add_argument("--wall-seconds", type=float, default=None)
    ap.add_argument("--notes", default="")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)

    cells, contexts = load_bench([p for p in a.bench if os.path.exists(p)])
    rows = summarize(cells)
    impls_by_op = {}
    for r in rows:
        s = impls_by_op.setdefault(r["op"], set())
        s.update(r["impl"].keys())
        s.update(r["errors"].keys())
    impls_by_op = {k: sorted(v, key=impl_order) for k, v in impls_by_op.items()}

    ctx = {}
    for c in contexts:
        for k, v in c.items():
            ctx.setdefault(k, v)
    torch_caps = sorted({c.get("torch_cpu_capability") for c in contexts
                         if c.get("torch_cpu_capability")})
    chart_files, chart_note = charts(rows, impls_by_op, a.out)

    L = []
    date = ctx.get("date", datetime.datetime.now().isoformat())[:10]
    L.append("# simdnorm side by side with oneDNN and libtorch\n")
    L.append("Machine: %s, %s cores (%s), %s. Date: %s." % (
        cpu_model(), ctx.get("num_cpus", os.cpu_count()), platform.machine(),
        ", ".join("L%d %s %s" % (c["level"], c["type"][0], human(c["size"]))
                  for c in ctx.get("caches", []) if c["type"] != "Instruction"), date))
    peers_line = []
    if "onednn_version" in ctx:
        peers_line.append("oneDNN %s (%s runtime, effective ISA %s, primitive cache %s)" % (
            ctx["onednn_version"], ctx.get("onednn_cpu_runtime"), ctx.get("onednn_effective_isa"),
            "off" if ctx.get("onednn_primitive_cache") == "0" else ctx.get("onednn_primitive_cache")))
    if "torch_version" in ctx:
        peers_line.append("libtorch %s (%s backend; CPU capability %s)" % (
            ctx["torch_version"], ctx.get("torch_parallel_backend"),
            " and ".join(torch_caps) if torch_caps else "?"))
    L.append("simdnorm ISA: %s. Peers: %s.\n" % (ctx.get("simdnorm_isa", "?"),
                                                ", ".join(peers_line) if peers_line else "none installed"))
    if a.command:
        L.append("Made with `%s`%s.\n" % (a.command, "" if a.wall_seconds is None else
                                         " in %.0f s wall time (build, sweep, accuracy, report)" % a.wall_seconds))
    L.append("""How to read: GB/s counts the minimal traffic, x read once and y written once (8 bytes per
element). The number in parentheses is the ratio to the in-run copy limit: the best copy
(ordinary stores, non-temporal stores or memcpy) of the same bytes at the same thread count,
timed after every run of the op, writing where the op writes and on the op's threads (oneTBB
for simdnorm, OpenMP for the peers). Each value is the median over the repetitions, which ran
in one randomly interleaved order per process, so simdnorm and every peer of a shape were
sampled throughout the run; repetitions during which the process waited for a CPU (schedstat
run-queue time above %.2f cores' worth: another process was running) are set aside when the cell
has undisturbed ones. Implementations are compared by the ratio, which holds on a noisy
shared machine (GB/s measured minutes apart do not). "copy limit GB/s" is the median of the
row's copy measurements. Bold: the highest ratio of the row. "simdnorm / best peer" (ratio of
ratios) < 1 means a peer is faster on that row (0.95 to 1: a tie within the noise). `n/a`: the peer has no such op; `mismatch`: its output differed from
simdnorm's and it was not timed. `torch` is libtorch's default dispatch; `torch_avx512` the same
with `ATEN_CPU_CAPABILITY=avx512` (a separate process: the capability is fixed per process).
""" % RUNQ_LIMIT)
    L.append("""To reproduce: `scripts/bench_report.sh` (Debian; it installs the build dependencies and
Debian's python3-matplotlib through `scripts/setup.sh`, builds `build-report/` and writes
`report/`). The peers are optional: `scripts/bench_report.sh --peers` also installs them
(`libdnnl-dev`, `libtorch-dev`, i.e. `scripts/setup.sh --peers`); without them the tables have
simdnorm alone. `--full` runs a longer sweep (5 repetitions, 3x longer runs, 1, 2, 4, ... threads
up to the core count).
""")
    if a.notes:
        L.append(a.notes + "\n")
    L.append("## Bandwidth\n")
    L.extend(bandwidth_tables(rows, impls_by_op))
    lo = losses(rows)
    L.append("## Where simdnorm loses\n")
    if lo:
        L.append("Every undisturbed cell where a peer's ratio is higher than simdnorm's "
                 "(below 0.95: a loss; 0.95 to 1: a tie within the noise).\n")
        L.append("| op | layout | shape | regime | threads | peer | simdnorm GB/s (ratio) | peer GB/s (ratio) | simdnorm / peer |")
        L.append("|---|---|---|---|---|---|---|---|---|")
        for op, lay, sh, reg, t, k, s, v, sg, vg in lo:
            L.append("| %s | %s | %s | %s | %d | %s | %s (%.2f) | %s (%.2f) | %s |" % (
                op, lay, sh, reg, t, k, fmt_gbps(sg), s, fmt_gbps(vg), v,
                "**%.2f**" % (s / v) if s / v < TIE else "%.2f (tie)" % (s / v)))
    else:
        L.append("Nowhere in this run among the undisturbed cells.")
    shaky = losses(rows, reliable=False)
    if shaky:
        L.append("")
        L.append("Also faster than simdnorm, but in cells whose repetitions were all disturbed "
                 "(not a reliable comparison): " +
                 "; ".join("%s %s %s t=%d %s (%.2f vs %.2f)" % (op, lay, sh, t, k, v, s)
                           for op, lay, sh, reg, t, k, s, v, sg, vg in shaky) + ".")
    L.append("")
    errs = errors_list(rows)
    if errs:
        L.append("Not timed (reported by the benchmark):\n")
        L.extend(errs)
        L.append("")
    if chart_files or chart_note:
        L.append("## Charts\n")
        if chart_note:
            L.append(chart_note + "\n")
        for op, what, name in chart_files:
            L.append("%s, %s:\n\n![%s %s](%s)\n" % (OP_TITLES.get(op, op), what, op, what, name))
    if a.accuracy:
        acc_paths = [p for p in a.accuracy if os.path.exists(p)]
        if acc_paths:
            tab, notes = accuracy_table(acc_paths)
            L.append("## Accuracy\n")
            L.append("""Maximum |y - y_ref| against a float64 reference (exact two-pass statistics of the same
float inputs), gamma = 1, beta = 0, eps = 1e-5, so outputs have unit scale. LayerNorm: 64 rows,
D = 4096. BatchNorm training-mode forward: (8, 64, 56, 56), N*H*W = 25088 values per channel.
"f32 floor": exact statistics rounded to float, y = (x - mean) * rstd in float, i.e. the error
of any kernel that keeps the mean in one float. Made by `simdnorm_accuracy`.
""")
            L.extend(tab)
            if notes:
                L.append("")
                L.extend("- " + n for n in notes)
            L.append("")
    with open(os.path.join(a.out, "README.md"), "w") as f:
        f.write("\n".join(L) + "\n")
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump([{"op": r["op"], "layout": r["layout"], "shape": shape_text(r["op"], r["params"]),
                    "regime": r["regime"], "threads": r["threads"], "GBps": r["impl"],
                    "ratio": r["ratio"], "copy_GBps": r["copies"], "errors": r["errors"],
                    "labels": r["labels"]}
                   for r in rows], f, indent=1)
    print("report: %s" % os.path.join(a.out, "README.md"))
    return 0


def human(n):
    for unit, s in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= s:
            return "%g %s" % (n / s, unit)
    return "%d B" % n


if __name__ == "__main__":
    sys.exit(main())
