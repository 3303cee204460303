"""The machine the report names: the CPU model of this machine and the benchmark's caches."""
import os
import platform
import subprocess


def cpu_model():
    """The model name, with the x86 family and model numbers: cloud guests often name only
    the vendor's brand ("AMD EPYC"), and the numbers tell the core (family 26: Zen 5)."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    if "model name" in fields:
        if "cpu family" in fields and "model" in fields:
            return "%s (family %s model %s)" % (fields["model name"], fields["cpu family"],
                                                fields["model"])
        return fields["model name"]
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


def getconf_caches():
    """L1 D, L2 and L3 sizes from glibc (getconf), for guests without the sysfs cache entries
    that Google Benchmark reads. They are what the CPU reports (CPUID), which a hypervisor may
    set: a guest's L3 can be the host's total."""
    out = []
    for level, kind, name in ((1, "D", "LEVEL1_DCACHE_SIZE"), (2, "U", "LEVEL2_CACHE_SIZE"),
                              (3, "U", "LEVEL3_CACHE_SIZE")):
        try:
            v = subprocess.run(["getconf", name], capture_output=True, text=True,
                               timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            v = ""
        if v.isdigit() and int(v) > 0:
            out.append("L%d %s %s" % (level, kind, human(int(v))))
    return ", ".join(out) + " (getconf)" if out else "cache sizes unknown"


def machine_fields(ctx):
    """Placeholders of the report's machine line: cpu, cores, arch, caches."""
    return {
        "cpu": cpu_model(),
        "cores": ctx.get("num_cpus", os.cpu_count()),
        "arch": platform.machine(),
        "caches": ", ".join("L%d %s %s" % (c["level"], c["type"][0], human(c["size"]))
                            for c in ctx.get("caches", []) if c["type"] != "Instruction")
                  or getconf_caches(),
    }
