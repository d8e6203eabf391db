"""Maps the decorator's `gpus` and `gpu_type` onto air's compute shapes (docs/workload-spec.md,
`compute`): an accelerator_type (the node shape) and num_accelerators. Every check happens at
decoration time, so a bad shape is an error before anything runs.
Thread safety: pure functions."""
import dataclasses
import difflib
import re

# gpu_type -> the node shapes air has for it, as {GPUs per node: accelerator_type}.
_GPU_SHAPES = {
    "A10": {1: "GPU_1xA10"},
    "H100": {1: "GPU_1xH100", 8: "GPU_8xH100"},
    "H200": {8: "GPU_8xH200"},
}
_MAX_CPU_PER_NODE = 256
KNOWN_GPU_TYPES = sorted(_GPU_SHAPES) + ["CPU", "CPU_<n>"]


@dataclasses.dataclass(frozen=True)
class Shape:
    accelerator_type: str  # air's compute.accelerator_type
    num_accelerators: int  # air's compute.num_accelerators (= world size)
    per_node: int          # ranks per node (LOCAL_WORLD_SIZE)
    cpu: bool              # ranks are CPU processes (gloo)

    @property
    def num_nodes(self) -> int:
        return self.num_accelerators // self.per_node


def _known() -> str:
    return ", ".join(repr(t) for t in KNOWN_GPU_TYPES)


def resolve_shape(gpus, gpu_type) -> Shape:
    """The air shape for `gpus` ranks of `gpu_type`, or ValueError/TypeError saying what is valid.

    'CPU' puts all ranks on one node; 'CPU_<n>' puts n ranks on each node (gpus a multiple of n).
    'H100' is one 1-GPU node (gpus=1) or 8-GPU nodes (gpus a multiple of 8); 'H200' 8-GPU nodes;
    'A10' one GPU per node."""
    if isinstance(gpus, bool) or not isinstance(gpus, int):
        raise TypeError(f"@distributed: gpus must be a positive integer, got {gpus!r} "
                        f"({type(gpus).__name__})")
    if gpus < 1:
        raise ValueError(f"@distributed: gpus must be a positive integer, got {gpus}")
    if not isinstance(gpu_type, str):
        raise TypeError(f"@distributed: gpu_type must be a string, one of {_known()}; "
                        f"got {gpu_type!r}")
    if gpu_type == "CPU" or gpu_type.startswith("CPU_"):
        per_node = gpus
        if gpu_type != "CPU":
            m = re.fullmatch(r"CPU_([1-9][0-9]*)", gpu_type)
            if not m or int(m.group(1)) > _MAX_CPU_PER_NODE:
                raise ValueError(f"@distributed: unknown gpu_type {gpu_type!r}: CPU_<n> takes n "
                                 f"ranks per node, 1 to {_MAX_CPU_PER_NODE}")
            per_node = int(m.group(1))
            if gpus % per_node:
                raise ValueError(
                    f"@distributed: gpus={gpus} is not a multiple of {per_node}, the ranks per "
                    f"node of {gpu_type!r}; use {_multiples(per_node)}")
        elif per_node > _MAX_CPU_PER_NODE:
            raise ValueError(f"@distributed: gpus={gpus} CPU ranks on one node is more than "
                             f"{_MAX_CPU_PER_NODE}; use gpu_type='CPU_<n>' for n ranks per node")
        return Shape(f"CPU_{per_node}", gpus, per_node, True)
    shapes = _GPU_SHAPES.get(gpu_type)
    if shapes is None:
        close = difflib.get_close_matches(gpu_type.upper(), list(_GPU_SHAPES) + ["CPU"], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"@distributed: unknown gpu_type {gpu_type!r}{hint}; known: {_known()}")
    if gpus in shapes:
        return Shape(shapes[gpus], gpus, gpus, False)
    per_node = max(shapes)
    if gpus % per_node == 0:
        return Shape(shapes[per_node], gpus, per_node, False)
    sizes = " or ".join(str(n) for n in sorted(shapes))
    raise ValueError(f"@distributed: gpus={gpus} does not fit {gpu_type} nodes, which have "
                     f"{sizes} GPU(s) each; use {_valid_counts(shapes)}")


def _multiples(n: int) -> str:
    return f"{n}, {2 * n}, {3 * n}, ..."


def _valid_counts(shapes: dict) -> str:
    largest = max(shapes)
    small = [str(n) for n in sorted(shapes) if n != largest]
    return ", ".join(small + [_multiples(largest)])
