"""The machine line every benchmark prints first (and last): the CPU's model, its count of
CPUs, the instruction-set flags the engine's kernels choose between (AVX2/FMA, AVX-512,
AVX512-BF16, AMX, VNNI) and the load average now. Ratios hold only for the CPU they were
measured on, so each figure travels with this line.

    sys.path.insert(0, str(REPO / "bench")); import cpu_info; print(cpu_info.describe())
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
