"""Eval latency of torchvision models before and after simdnorm_torch.convert().

For each model and thread count: the median forward time of the original and of the converted
model (timed alternately, so both see the same machine load), the share of the forward spent in
normalization operators (torch.profiler: aten::batch_norm / layer_norm / group_norm /
instance_norm before, simdnorm::* after), and the per-call time of one normalization on a tiny
tensor (the fixed overhead of each path). Prints Markdown. --dtype bfloat16 runs the models with
bfloat16 weights and activations (what a CPU LLM or vision engine on AVX512-BF16 runs).
"""
import argparse
import copy
import datetime
import os
import platform
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
import torchvision
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

import simdnorm_torch

NORM_OPS = {"aten::batch_norm", "aten::layer_norm", "aten::group_norm", "aten::instance_norm",
            "simdnorm::batch_norm", "simdnorm::layer_norm", "simdnorm::group_norm",
            "simdnorm::instance_norm", "simdnorm::rms_norm"}


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return platform.processor() or "unknown"


def parallel_backend():
    for line in torch.__config__.parallel_info().splitlines():
        if line.startswith("ATen parallel backend"):
            return line.strip()
    return "ATen parallel backend: unknown"


def forward_seconds(model, x):
    start = time.perf_counter()
    model(x)
    return time.perf_counter() - start


def norm_share(model, x, forwards):
    """(seconds in normalization ops per forward, their share of the forward time), from
    `forwards` profiled forwards."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(forwards):
            with record_function("forward"):
                model(x)
    events = prof.key_averages()
    total = next(e.cpu_time_total for e in events if e.key == "forward")
    norm = sum(e.cpu_time_total for e in events if e.key in NORM_OPS)
    return norm * 1e-6 / forwards, norm / total


def norm_layers(model, conv, x):
    """[(original module, converted module, its input)] for each converted normalization
    module, the inputs recorded during one forward of the original."""
    conv_modules = dict(conv.named_modules())
    modules, inputs, handles = {}, {}, []

    def record(name):
        def hook(module, args, output):  # returns None: the output stays as it is
            inputs.setdefault(name, args[0].clone())
        return hook

    for name, m in model.named_modules():
        c = conv_modules.get(name)
        if c is not None and type(c) is not type(m) and isinstance(c, type(m)):
            modules[name] = (m, c)
            handles.append(m.register_forward_hook(record(name)))
    model(x)
    for h in handles:
        h.remove()
    return [(m, c, inputs[name]) for name, (m, c) in modules.items() if name in inputs]


def isolated_norm_seconds(layers, reps):
    """Sum over the layers of the median time of one call, original and converted module,
    timed alternately: the normalization work without the rest of the model."""
    before = after = 0.0
    for m, c, x in layers:
        m(x)
        c(x)
        tb, ta = [], []
        for _ in range(reps):
            tb.append(forward_seconds(m, x))
            ta.append(forward_seconds(c, x))
        before += statistics.median(tb)
        after += statistics.median(ta)
    return before, after


def bench_model(name, size, batch, threads, runs, profile_runs, dtype):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval().to(dtype)
    conv = copy.deepcopy(model)
    report = simdnorm_torch.convert(conv)
    x = torch.randn(batch, 3, size, size, dtype=dtype)
    rows = []
    with torch.inference_mode():
        for t in threads:
            torch.set_num_threads(t)
            forward_seconds(model, x)  # warm-up: allocator, plans
            forward_seconds(conv, x)
            before, after = [], []
            for _ in range(runs):
                before.append(forward_seconds(model, x))
                after.append(forward_seconds(conv, x))
            norm_before, share_before = norm_share(model, x, profile_runs)
            norm_after, share_after = norm_share(conv, x, profile_runs)
            alone_before, alone_after = isolated_norm_seconds(norm_layers(model, conv, x), 7)
            rows.append(dict(model=name, threads=t, converted=report.num_converted,
                             skipped=len(report.skipped), before=statistics.median(before),
                             after=statistics.median(after), norm_before=norm_before,
                             norm_after=norm_after, share_before=share_before,
                             share_after=share_after, alone_before=alone_before,
                             alone_after=alone_after))
            print(f"  {name} threads={t}: {rows[-1]}", file=sys.stderr, flush=True)
    return rows


def per_call_us(fn, calls=2000, repeats=5):
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def tiny_overheads():
    """Per-call microseconds on tiny tensors, 1 thread: functional torch op, simdnorm operator,
    torch module, converted module."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rows = []
    with torch.inference_mode():
        x = torch.randn(1, 8)
        ln = nn.LayerNorm(8).eval()
        ln_conv = copy.deepcopy(ln)
        simdnorm_torch.convert(ln_conv)
        rows.append(("LayerNorm [1, 8]",
                     per_call_us(lambda: F.layer_norm(x, (8,), ln.weight, ln.bias, 1e-5)),
                     per_call_us(lambda: simdnorm_torch.ops.layer_norm(x, [8], ln.weight,
                                                                       ln.bias, 1e-5)),
                     per_call_us(lambda: ln(x)), per_call_us(lambda: ln_conv(x))))
        x4 = torch.randn(1, 8, 2, 2)
        bn = nn.BatchNorm2d(8).eval()
        bn_conv = copy.deepcopy(bn)
        simdnorm_torch.convert(bn_conv)
        rows.append(("BatchNorm2d eval [1, 8, 2, 2]",
                     per_call_us(lambda: F.batch_norm(x4, bn.running_mean, bn.running_var,
                                                      bn.weight, bn.bias, False, 0.1, 1e-5)),
                     per_call_us(lambda: simdnorm_torch.ops.batch_norm(
                         x4, bn.weight, bn.bias, bn.running_mean, bn.running_var, None, False,
                         0.1, False, 1e-5)),
                     per_call_us(lambda: bn(x4)), per_call_us(lambda: bn_conv(x4))))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50,mobilenet_v3_large,convnext_tiny,"
                        "vit_b_16,swin_t")
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--runs", type=int, default=3, help="timed forwards per variant")
    parser.add_argument("--profile-runs", type=int, default=2,
                        help="profiled forwards per variant (norm share)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"],
                        help="weights and activations of the models")
    parser.add_argument("--command", default="", help="the command line to print")
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]

    start = time.time()
    load_start = os.getloadavg()[0]
    rows = []
    for name in args.models.split(","):
        rows += bench_model(name, args.size, args.batch, threads, args.runs, args.profile_runs,
                            getattr(torch, args.dtype))
    tiny = tiny_overheads()
    wall = time.time() - start
    load_end = os.getloadavg()[0]

    out = ["# simdnorm inside PyTorch: torchvision models before and after convert()", ""]
    out.append(f"Machine: {cpu_model()}, {len(os.sched_getaffinity(0))} usable CPUs, shared "
               f"(1-minute load average {load_start:.1f} at the start, {load_end:.1f} at the "
               f"end). Date: {datetime.date.today().isoformat()}.")
    out.append(f"PyTorch {torch.__version__} (Debian), torchvision {torchvision.__version__}, "
               f"simdnorm ISA {simdnorm_torch.kernel_isa()}; {parallel_backend()}.")
    out.append("")
    out.append(f"Made with `{args.command or ' '.join(sys.argv)}` in {wall:.0f} s wall time. "
               f"Input: batch {args.batch}, 3x{args.size}x{args.size}, {args.dtype} weights and "
               f"activations, random weights (`weights=None`), eval under "
               f"`torch.inference_mode()`.")
    out.append("")
    out.append("How to read: *before* / *after* are the median of "
               f"{args.runs} forwards of the original and the converted model, timed "
               "alternately after one warm-up each (the machine is shared: read the ratio, not "
               "the absolute times). *after / before* < 1: converted is faster. *norm ms* and "
               "*norm share*: time inside the normalization operators (aten::batch_norm, "
               "layer_norm, group_norm, instance_norm before; simdnorm::* after) per forward and "
               f"its share of the forward, from {args.profile_runs} forwards under "
               "torch.profiler (which adds its own overhead per op). *modules*: normalization "
               "modules converted (and left to PyTorch). *alone*: the converted modules timed "
               "one by one on the inputs they get in the model, original and converted "
               "alternately, median of 7 calls each, summed over the modules (module call "
               "overhead included); *alone speedup* = before / after. The end-to-end times "
               "swing with the machine's load by more than the normalization share; *alone* "
               "is the steadier comparison of the normalization work.")
    out.append("")
    out.append("| model | threads | modules | before ms | after ms | after / before "
               "| norm ms before | norm ms after | norm share before | norm share after "
               "| alone ms before | alone ms after | alone speedup |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        out.append(f"| {r['model']} | {r['threads']} | {r['converted']} ({r['skipped']}) "
                   f"| {r['before'] * 1e3:.1f} | {r['after'] * 1e3:.1f} "
                   f"| {r['after'] / r['before']:.3f} | {r['norm_before'] * 1e3:.2f} "
                   f"| {r['norm_after'] * 1e3:.2f} | {r['share_before'] * 100:.1f} % "
                   f"| {r['share_after'] * 100:.1f} % | {r['alone_before'] * 1e3:.2f} "
                   f"| {r['alone_after'] * 1e3:.2f} "
                   f"| {r['alone_before'] / r['alone_after']:.2f} |")
    out.append("")
    slower = [f"{r['model']} ({r['threads']} thr)" for r in rows if r["after"] > r["before"]]
    norm_slower = [f"{r['model']} ({r['threads']} thr)" for r in rows
                   if r["norm_after"] > r["norm_before"]]
    alone_slower = [f"{r['model']} ({r['threads']} thr)" for r in rows
                    if r["alone_after"] > r["alone_before"]]
    out.append("Converted slower end to end: " + (", ".join(slower) or "none") + ". "
               "Normalization time (profiler) higher after conversion: " +
               (", ".join(norm_slower) or "none") + ". Normalization modules alone slower "
               "after conversion: " + (", ".join(alone_slower) or "none") + ".")
    out.append("")
    out.append("## Per-call overhead on a tiny float32 tensor (1 thread, microseconds per call)")
    out.append("")
    out.append("Median of 5 loops of 2000 calls. *functional*: `torch.nn.functional`; "
               "*operator*: `torch.ops.simdnorm.*` called directly; *module*: the torch.nn "
               "module; *converted*: the same module after convert() (one C++ call that checks "
               "the input and runs the operator).")
    out.append("")
    out.append("| op | functional | operator | module | converted |")
    out.append("|---|---:|---:|---:|---:|")
    for name, *values in tiny:
        out.append(f"| {name} | " + " | ".join(f"{v:.2f}" for v in values) + " |")
    print("\n".join(out))


if __name__ == "__main__":
    main()
