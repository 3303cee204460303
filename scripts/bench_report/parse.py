"""Reading simdnorm_bench (Google Benchmark) and simdnorm_accuracy JSON.

Benchmark names are op/impl/params.../threads:T. For simdnorm, impl is the ISA that ran (e.g.
avx512bw, as SIMDNORM_ISA spells it); for a peer, the peer's name (onednn, torch,
torch_avx512). Which names are peers is read from each file's context ("peers": the
comma-separated names of the peers that process registered; absent when it had none), so the
report needs no list of ISAs: every other implementation name is one of simdnorm's ISAs.
"""
import json
import math
import re

MiB = 1 << 20
LAYOUTS = ("nchw", "nhwc", "rows")


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
    elem = 2.0 if op.endswith(("_bf16", "_f16")) else 4.0
    t = dims_token(params)
    if t:
        return elem * math.prod(int(v) for v in t.split("x"))
    dims = [int(d[k]) for k in ("N", "C", "H", "W") if k in d]
    if len(dims) == 4:
        return elem * math.prod(dims)
    return None


def shape_text(op, params):
    d = dict(params)
    if "D" in d and "x_MiB" in d:  # the row ops
        return "D=%s, x %s MiB" % (d["D"], d["x_MiB"])
    out = []
    for k, v in params:
        if k is None and v.lower() in LAYOUTS:
            continue  # the layout column
        out.append(v if k is None else "%s=%s" % (k, v))
    return ", ".join(out)


def layout_of(params):
    d = dict((k, v) for k, v in params if k)
    for k in ("layout", "lay"):
        if k in d:
            return d[k]
    for _, v in params:
        if v.lower() in LAYOUTS:
            return v.lower()
    return "rows"


def peer_names(context):
    """The peers a benchmark process registered, from its context."""
    return {p for p in context.get("peers", "").split(",") if p and p != "none"}


class Cell:
    """The repetitions of one implementation at one (op, params, threads)."""

    def __init__(self):
        self.gbps, self.copy, self.ratio, self.runq, self.errors = [], [], [], [], []
        self.labels, self.diff, self.differs = set(), None, False


def load_bench(paths):
    """cells: (op, params, threads) -> impl -> Cell, where simdnorm's ISAs are merged into
    impl "simdnorm" (the ISA names go to its labels); contexts: each file's context."""
    cells = {}
    contexts = []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        context = data.get("context", {})
        contexts.append(context)
        peers = peer_names(context)
        for b in data.get("benchmarks", []):
            if b.get("run_type") == "aggregate":
                continue
            op, impl, params, threads = parse_name(b.get("run_name", b["name"]))
            impl_name = impl if impl in peers else "simdnorm"
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


def load_accuracy(paths):
    """results: (op, type, layout, shape, input) -> impl -> entry; impls: the implementations,
    in order of appearance, without the "floor" reference row (named "f32_floor" before the
    bf16 rows)."""
    results = {}
    impls = []
    for p in paths:
        with open(p) as f:
            data = json.load(f)
        for e in data.get("results", []):
            k = (e["op"], e.get("type", "f32"), e["layout"], e["shape"], e["input"])
            impl = "floor" if e["impl"] == "f32_floor" else e["impl"]
            results.setdefault(k, {})[impl] = e
            if impl not in impls and impl != "floor":
                impls.append(impl)
    return results, impls
