"""Rows -> the report's README.md (its prose is template.md) and results.json."""
import datetime
import json
import os
import re
import string

from .machine import machine_fields
from .parse import shape_text
from .summarize import RUNQ_LIMIT, TIE, impl_order, losses, errors_list

OP_TITLES = {
    "layer_norm": "LayerNorm forward",
    "layer_norm_single_mean": "LayerNorm forward with a single-float mean (prices the default hi + lo mean)",
    "rms_norm": "RMSNorm forward",
    "batch_norm_inference": "BatchNorm inference",
    "batch_norm_training": "BatchNorm training-mode forward (batch statistics)",
    "group_norm32": "GroupNorm(32) forward",
    "layer_norm_bf16": "LayerNorm forward, bf16 x and y",
    "rms_norm_bf16": "RMSNorm forward, bf16 x and y",
    "batch_norm_inference_bf16": "BatchNorm inference, bf16 x and y",
    "batch_norm_training_bf16": "BatchNorm training-mode forward, bf16 x and y",
    "group_norm32_bf16": "GroupNorm(32) forward, bf16 x and y",
}
TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "template.md")
_BLOCK = re.compile(r"^<!-- block (\w+) -->\n", re.M)


def load_template(path=TEMPLATE):
    """name -> string.Template of each block of the template file."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    marks = list(_BLOCK.finditer(text))
    blocks = {}
    for m, nxt in zip(marks, marks[1:] + [None]):
        body = text[m.end():nxt.start() if nxt else len(text)]
        blocks[m.group(1)] = string.Template(body.rstrip("\n"))
    return blocks


def fmt_gbps(v):
    if v is None:
        return "-"
    return "%.3g" % v if v < 100 else "%.0f" % v


def _lines(lines):
    """The text of a list of lines, each ending in a newline."""
    return "".join(x + "\n" for x in lines)


def bandwidth_tables(rows, impls_by_op, t):
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
                    s = "%s (%.2f)" % (fmt_gbps(g), q)
                    if i in r["differs"]:
                        s += " †"
                    if i in r["disturbed"]:
                        s += " ~"
                    if q == best and len(r["impl"]) > 1:
                        s = "**" + s + "**"
                    cells.append(s)
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
                    c = "%.2fx" % x + ("" if x >= 1 else " **loses to %s**" % bp if x < TIE
                                       else " (tie with %s)" % bp)
                    cells.append(c + (" ~" if shaky else ""))
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
            out.append(t["peers_ran"].substitute(peers="; ".join(
                "%s %s: %s" % (k, "/".join(sorted(l)), lab) for (k, lab), l in sorted(used.items()))))
        nd = sum(len(r["disturbed"]) for r in rows if r["op"] == op)
        if nd:
            out.append("")
            out.append(t["all_disturbed"].substitute(runq_limit="%.2f" % RUNQ_LIMIT, cells=nd))
        if diffs:
            worst = {}
            for k, v in diffs:
                worst[k] = max(worst.get(k, 0), v)
            out.append("")
            out.append(t["output_differs"].substitute(
                largest=", ".join("%s %.2g" % kv for kv in sorted(worst.items()))))
        out.append("")
    return out


def losses_section(rows, t):
    lo = losses(rows)
    if lo:
        text = t["losses"].substitute(tie="%.2f" % TIE, rows="\n".join(
            "| %s | %s | %s | %s | %d | %s | %s (%.2f) | %s (%.2f) | %s |" % (
                op, lay, sh, reg, th, k, fmt_gbps(sg), s, fmt_gbps(vg), v,
                "**%.2f**" % (s / v) if s / v < TIE else "%.2f (tie)" % (s / v))
            for op, lay, sh, reg, th, k, s, v, sg, vg in lo)) + "\n"
    else:
        text = t["no_losses"].substitute() + "\n"
    shaky = losses(rows, reliable=False)
    if shaky:
        text += "\n" + t["disturbed_losses"].substitute(cells="; ".join(
            "%s %s %s t=%d %s (%.2f vs %.2f)" % (op, lay, sh, th, k, v, s)
            for op, lay, sh, reg, th, k, s, v, sg, vg in shaky)) + "\n"
    return text


def accuracy_table(results, impls):
    impls = sorted(impls, key=impl_order)
    out = ["| op | type | layout | shape | input | floor | " + " | ".join(impls) + " |",
           "|" + "---|" * (6 + len(impls))]

    def f(e):
        if e is None:
            return "-"
        v = e.get("max_abs_error")
        if v is None:
            return "n/a"
        s = "0" if v == 0 else "%.2g" % v
        return s + (" (non-finite!)" if e.get("note") == "non-finite outputs" else "")

    order = {"N(0,1)": 0, "1e4+N(0,1)": 1, "1e6+N(0,1)": 2, "16+N(0,1)": 1, "256+N(0,1)": 2}
    for k in sorted(results, key=lambda k: (k[1] != "f32", k[0] != "layer_norm", k[0], k[2],
                                            k[3], order.get(k[4], 9))):
        r = results[k]
        out.append("| %s | %s | %s | %s | %s | %s | " % (k + (f(r.get("floor")),))
                   + " | ".join(f(r.get(i)) for i in impls) + " |")
    notes = sorted({"%s on %s: %s" % (i, k[0], e["note"]) for k, r in results.items()
                    for i, e in r.items() if e.get("max_abs_error") is None and e.get("note")})
    return out, notes


def peers_text(ctx, contexts, t):
    torch_caps = sorted({c.get("torch_cpu_capability") for c in contexts
                         if c.get("torch_cpu_capability")})
    peers = []
    if "onednn_version" in ctx:
        peers.append(t["peer_onednn"].substitute(
            version=ctx["onednn_version"], runtime=ctx.get("onednn_cpu_runtime"),
            isa=ctx.get("onednn_effective_isa"),
            cache="off" if ctx.get("onednn_primitive_cache") == "0" else ctx.get("onednn_primitive_cache")))
    if "torch_version" in ctx:
        peers.append(t["peer_torch"].substitute(
            version=ctx["torch_version"], backend=ctx.get("torch_parallel_backend"),
            capability=" and ".join(torch_caps) if torch_caps else "?"))
    return ", ".join(peers) if peers else t["no_peers"].substitute()


def readme(rows, impls_by_op, ctx, contexts, command="", wall_seconds=None, notes="",
           chart_files=(), chart_note=None, accuracy=None):
    """The report's README.md text. accuracy: (results, impls) from parse.load_accuracy."""
    t = load_template()
    made_with = ""
    if command:
        wall = "" if wall_seconds is None else " " + t["wall_time"].substitute(
            seconds="%.0f" % wall_seconds)
        made_with = t["made_with"].substitute(command=command, wall_time=wall) + "\n\n"
    errs = errors_list(rows)
    not_timed = t["not_timed"].substitute(errors="\n".join(errs)) + "\n\n" if errs else ""
    charts = ""
    if chart_files or chart_note:
        entries = [chart_note] if chart_note else []
        entries += [t["chart"].substitute(title=OP_TITLES.get(op, op), what=what, op=op, file=name)
                    for op, what, name in chart_files]
        charts = t["charts"].substitute(charts="\n\n".join(entries)) + "\n\n"
    acc = ""
    if accuracy is not None:
        tab, acc_notes = accuracy_table(*accuracy)
        if acc_notes:
            tab += [""] + ["- " + n for n in acc_notes]
        acc = t["accuracy"].substitute(table="\n".join(tab)) + "\n\n"
    return t["report"].substitute(
        machine_fields(ctx),
        date=ctx.get("date", datetime.datetime.now().isoformat())[:10],
        simdnorm_isa=ctx.get("simdnorm_isa", "?"),
        peers=peers_text(ctx, contexts, t),
        made_with=made_with,
        runq_limit="%.2f" % RUNQ_LIMIT,
        tie="%.2f" % TIE,
        notes=notes + "\n\n" if notes else "",
        bandwidth=_lines(bandwidth_tables(rows, impls_by_op, t)),
        losses=losses_section(rows, t),
        not_timed=not_timed,
        charts=charts,
        accuracy=acc)


def results_json(rows, path):
    with open(path, "w") as f:
        json.dump([{"op": r["op"], "layout": r["layout"], "shape": shape_text(r["op"], r["params"]),
                    "regime": r["regime"], "threads": r["threads"], "GBps": r["impl"],
                    "ratio": r["ratio"], "copy_GBps": r["copies"], "errors": r["errors"],
                    "labels": r["labels"]}
                   for r in rows], f, indent=1)
