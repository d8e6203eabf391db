"""The machine line every benchmark prints first (and last): the CPU's model, its count of
CPUs, the instruction-set flags the engine's kernels choose between (AVX2/FMA, AVX-512,
AVX512-BF16, AMX, VNNI) and the load average now. Ratios hold only for the CPU they were
measured on, so each figure travels with this line. Also the host's steal time (a virtual
machine's CPUs waiting while the host runs other guests) over a stretch of a benchmark.

    sys.path.insert(0, str(REPO / "bench")); import cpu_info; print(cpu_info.describe())
    before = cpu_info.cpu_times(); ...; print(cpu_info.steal_percent(before, cpu_info.cpu_times()))
"""
import os
import pathlib

KERNEL_FLAG_PREFIXES = ("avx512", "amx", "avx2", "fma", "avx_vnni")


def describe():
    """'<model>; <n> CPUs; flags <...>; load <1-min average>' from /proc/cpuinfo."""
    model, flags = "unknown CPU", []
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    for line in text.splitlines():
        if line.startswith("model name") and model == "unknown CPU":
            model = line.split(":", 1)[1].strip()
        if line.startswith("flags") and not flags:
            flags = line.split(":", 1)[1].split()
    wanted = [f for f in flags if f.startswith(KERNEL_FLAG_PREFIXES)] or ["none of avx2/avx512"]
    return (f"{model}; {os.cpu_count()} CPUs; flags {' '.join(wanted)}; "
            f"load {os.getloadavg()[0]:.1f}")


def cpu_times():
    """The aggregate 'cpu' line of /proc/stat: (steal, total) in clock ticks ((0, 0) where the
    file or the steal column is missing)."""
    try:
        fields = pathlib.Path("/proc/stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return 0, 0
    ticks = [int(f) for f in fields[1:9]]  # user nice system idle iowait irq softirq steal
    return (ticks[7], sum(ticks)) if len(ticks) == 8 else (0, 0)


def steal_percent(before, after):
    """The share of all CPUs' time between two cpu_times() readings that the host stole."""
    total = after[1] - before[1]
    return 100.0 * (after[0] - before[0]) / total if total > 0 else 0.0
