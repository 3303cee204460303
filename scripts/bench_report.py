#!/usr/bin/python3
"""Turns simdnorm_bench JSON runs and simdnorm_accuracy JSON into a report folder.

    bench_report.py --out DIR --bench a.json [b.json ...] --accuracy acc.json [acc2.json ...]
                    [--command "scripts/bench_report.sh ..."] [--wall-seconds N] [--notes TEXT]

Writes DIR/README.md (bandwidth table per op, summary of where simdnorm loses, accuracy table;
its prose is bench_report/template.md), DIR/results.json and, when matplotlib is importable
(Debian: python3-matplotlib, run with /usr/bin/python3), DIR/bw_<op>.png (bandwidth per shape:
simdnorm, each peer, the copy limit) and DIR/threads_<op>.png (thread scaling). Standard
library only, besides matplotlib. The code is the bench_report package next to this file.

Benchmark names are op/impl/params.../threads:T (simdnorm's impl is its ISA, e.g. avx512bw;
peers are onednn, torch, torch_avx512, named as peers in the JSON's context). Per benchmark the
values are medians over the repetitions of each repetition's GB/s (bytes / median op time),
copy GB/s (best of the three copies of the same bytes at the same thread count, interleaved
with the op, writing where the op writes, on the op's thread runtime) and their ratio.
Implementations are compared by that in-run ratio: sampled next to each other in time, the op
and its copy see the same machine, so the ratio holds on a noisy shared machine where GB/s
taken minutes apart do not.
"""
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from bench_report.cli import main  # noqa: E402 (the package scripts/bench_report/)

if __name__ == "__main__":
    sys.exit(main(__doc__.split("\n")[0]))
