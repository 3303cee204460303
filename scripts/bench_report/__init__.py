"""The report of scripts/bench_report.sh, from simdnorm_bench and simdnorm_accuracy JSON.

    parse      benchmark names and JSON files -> cells of repetitions per (op, shape, threads)
    summarize  cells -> one row per (op, shape, threads): medians, regime, losses, errors
    render     rows -> README.md (prose from template.md) and results.json
    charts     rows -> PNG charts, when matplotlib is importable
    machine    the machine line: CPU model, cache sizes
    cli        the command line (scripts/bench_report.py)
"""
