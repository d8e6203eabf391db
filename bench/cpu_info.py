"""The machine line every benchmark prints first (and last): the CPU's model, its count of
CPUs, the instruction-set flags the engine's kernels choose between (AVX2/FMA, AVX-512,
AVX512-BF16, AMX, VNNI) and the load average now. Ratios hold only for the CPU they were
measured on, so each figure travels with this line. Also the host's steal time (a virtual
machine's CPUs waiting while the host runs other guests) over a stretch of a benchmark.

    sys.path.insert(0, str(REPO / "bench")); import cpu_info; print(cpu_info.describe())
    before = cpu_info.cpu_times(); ...; print(cpu_info.steal_percent(before, cpu_info.cpu_times()))

And the `--isa avx2` cap the benches share (cap_isa): both sides run as on an AVX2-only CPU.
"""
import os
import pathlib

KERNEL_FLAG_PREFIXES = ("avx512", "amx", "avx2", "fma", "avx_vnni")

# --isa avx2: air's AVX2 kernels and PyTorch's (ATen's, and oneDNN's and MKL's, its fp32 GEMM:
# no AVX-512, no bf16 dot products), as a CPU without AVX-512 (AMD Zen 2/3, Intel's client
# cores) runs them.
ISA_CAPS = {"native": {}, "avx2": {"AIR_CPU_KERNELS": "avx2", "ATEN_CPU_CAPABILITY": "avx2",
                                   "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}}


def cap_isa(isa):
    """Sets the environment for `isa` (a key of ISA_CAPS) in this process and the ones it
    starts: call it before torch is imported (ATen, oneDNN and MKL read these once)."""
    os.environ.update(ISA_CAPS[isa])


def describe_isa(torch):
    """What each side's kernels are capped at, for the figures' header."""
    return (f"pytorch {torch.__version__}: ATen kernels {torch.backends.cpu.get_cpu_capability()}, "
            f"oneDNN/MKL ISA cap {os.environ.get('ONEDNN_MAX_CPU_ISA', 'none')}; "
            f"air kernels {os.environ.get('AIR_CPU_KERNELS', 'the best this CPU has')}")


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
