"""The command line of scripts/bench_report.py."""
import argparse
import os

from . import parse, render, summarize
from .charts import charts


def main(description):
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--out", required=True)
    ap.add_argument("--bench", nargs="+", default=[])
    ap.add_argument("--accuracy", nargs="*", default=[])
    ap.add_argument("--command", default="")
    ap.add_argument("--wall-seconds", type=float, default=None)
    ap.add_argument("--notes", default="")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)

    cells, contexts = parse.load_bench([p for p in a.bench if os.path.exists(p)])
    rows = summarize.summarize(cells)
    impls_by_op = summarize.impls_by_op(rows)
    chart_files, chart_note = charts(rows, impls_by_op, a.out)
    acc_paths = [p for p in a.accuracy if os.path.exists(p)]
    text = render.readme(rows, impls_by_op, summarize.merged_context(contexts), contexts,
                         command=a.command, wall_seconds=a.wall_seconds, notes=a.notes,
                         chart_files=chart_files, chart_note=chart_note,
                         accuracy=parse.load_accuracy(acc_paths) if acc_paths else None)
    readme = os.path.join(a.out, "README.md")
    with open(readme, "w", encoding="utf-8") as f:
        f.write(text)
    render.results_json(rows, os.path.join(a.out, "results.json"))
    print("report: %s" % readme)
    return 0
