"""The machine the report names: the CPU model of this machine and the benchmark's caches."""
import os
import platform
import subprocess


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


def human(n):
    for unit, s in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= s:
            return "%g %s" % (n / s, unit)
    return "%d B" % n


def machine_fields(ctx):
    """Placeholders of the report's machine line: cpu, cores, arch, caches."""
    return {
        "cpu": cpu_model(),
        "cores": ctx.get("num_cpus", os.cpu_count()),
        "arch": platform.machine(),
        "caches": ", ".join("L%d %s %s" % (c["level"], c["type"][0], human(c["size"]))
                            for c in ctx.get("caches", []) if c["type"] != "Instruction"),
    }
