"""Cells of repetitions -> one row per (op, shape, threads), and what the report says of them."""
import re
import statistics

from .parse import MiB, layout_of, shape_text, x_bytes

PEER_ORDER = ["onednn", "torch", "torch_avx512"]
# Cores' worth of run-queue waiting above which a repetition counts as disturbed.
RUNQ_LIMIT = 0.1
# simdnorm / best peer (ratio of ratios) at or above this, below 1: a tie, not a loss (the
# repeatability of a ratio on this kind of shared machine is a few per cent at best).
TIE = 0.95
# x of at least this many bytes is labelled "DRAM", smaller x "cache". This is no cache size of
# any machine: it separates the two sets of shapes the sweep runs (scripts/bench_report.sh),
# x of at most about 6 MiB (LayerNorm's 1 MiB, the CNN and UNet tensors) and x of 256 MiB
# (x and y together 512 MiB, twice the largest L3 measured, 260 MiB), so every machine labels
# the same shapes alike.
DRAM_MIN_X_BYTES = 64 * MiB


def impl_order(name):
    if name == "simdnorm":
        return (0, name)
    if name in PEER_ORDER:
        return (1 + PEER_ORDER.index(name), name)
    return (10, name)


def med(v):
    return statistics.median(v) if v else None


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
        r["regime"] = "?" if xb is None else ("DRAM" if xb >= DRAM_MIN_X_BYTES else "cache")
        r["layout"] = layout_of(params)
        rows.append(r)

    def key(r):
        def num(v):
            return [int(t) for t in re.findall(r"\d+", v)] or [0]
        return (r["op"], r["layout"], r["regime"] != "cache",
                [(num(v), v) for k, v in r["params"] if v.lower() not in ("nchw", "nhwc")],
                r["threads"])

    rows.sort(key=key)
    return rows


def impls_by_op(rows):
    """op -> the implementations that have a value or an error for it, simdnorm first."""
    by_op = {}
    for r in rows:
        s = by_op.setdefault(r["op"], set())
        s.update(r["impl"].keys())
        s.update(r["errors"].keys())
    return {k: sorted(v, key=impl_order) for k, v in by_op.items()}


def merged_context(contexts):
    """One context: for each key, the first file's value."""
    ctx = {}
    for c in contexts:
        for k, v in c.items():
            ctx.setdefault(k, v)
    return ctx


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
