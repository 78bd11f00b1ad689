"""Presets for common accelerators: memory, peak FLOP/s and memory bandwidth
as their vendors publish them, for `device_inventory(preset=...)`.

    partplan.device_inventory(preset="H100-SXM", count=8)
    partplan.accelerators.get("a100")        # the A100-80GB preset
    partplan.accelerators.names()            # canonical names, in table order

Conventions (docs/accelerators.md has every figure with its source):
- `flops_per_second` is the peak dense BF16 matrix throughput (tensor or
  matrix cores, without 2:4 structured sparsity). Models trained in another
  precision, or runs that reach a fraction of peak (all of them), should
  scale it: `device_inventory(preset=..., flops_per_second=...)`.
- `memory_bytes` is the capacity the vendor prints, in decimal units (80 GB
  is 80 * 10**9 bytes). The physical HBM is often the same number in GiB;
  the difference is left to the runtime, which never gets all of it.
- `memory_bandwidth` is the peak HBM bandwidth in bytes/s.
- `interconnect_bandwidth` is the vendor's device-to-device figure in bytes/s,
  summed over both directions and all links, or None where no vendor figure
  was confirmed. It is for reference only: device_inventory does not derive
  `transfer_rate` from it, since a rate between two devices depends on how
  they are wired.
"""

import re
import types
from typing import Dict, List, Mapping, NamedTuple, Optional, Tuple, Union

PRECISION = "bf16"
DENSE = True

_GB = 10**9

# Vendor documents the figures come from (docs/accelerators.md says how each
# was read).
_A100_WHITEPAPER = ("https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/"
                    "nvidia-ampere-architecture-whitepaper.pdf")
_A100_DATASHEET = ("https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
                   "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf")
_H100_DATASHEET = "https://resources.nvidia.com/en-us-gpu-resources/h100-datasheet-24306"
_MI300_ARCH = "https://rocm.docs.amd.com/en/latest/conceptual/gpu-arch/mi300.html"
_ROCM_SPECS = "https://rocm.docs.amd.com/en/latest/reference/gpu-arch-specs.html"
_TPU_V5E = "https://cloud.google.com/tpu/docs/v5e"


class Accelerator(NamedTuple):
    """One accelerator's published figures (units: bytes, FLOP/s, bytes/s)."""

    name: str
    vendor: str
    memory_bytes: int
    flops_per_second: float
    memory_bandwidth: float
    interconnect_bandwidth: Optional[float]
    # Figure name ("memory_bytes", "flops_per_second", ...) -> source URL.
    sources: Mapping[str, str]
    aliases: Tuple[str, ...] = ()


def _sources(memory: str, flops: str, bandwidth: str, interconnect: Optional[str] = None):
    table = {"memory_bytes": memory, "flops_per_second": flops, "memory_bandwidth": bandwidth}
    if interconnect:
        table["interconnect_bandwidth"] = interconnect
    return types.MappingProxyType(table)


_TABLE = (
    Accelerator(
        "A100-40GB", "NVIDIA", 40 * _GB, 312e12, 1555e9, 600e9,
        _sources(_A100_WHITEPAPER, _A100_WHITEPAPER, _A100_WHITEPAPER, _A100_WHITEPAPER),
        aliases=("A100-40G", "A100-SXM4-40GB")),
    Accelerator(
        "A100-80GB", "NVIDIA", 80 * _GB, 312e12, 2039e9, 600e9,
        _sources(_A100_DATASHEET, _A100_DATASHEET, _A100_DATASHEET, _A100_DATASHEET),
        # The 80 GB SXM part replaced the 40 GB one, so a bare "A100" means it.
        aliases=("A100", "A100-80G", "A100-SXM", "A100-SXM4-80GB", "A100-80GB-SXM")),
    Accelerator(
        "A100-80GB-PCIe", "NVIDIA", 80 * _GB, 312e12, 1935e9, 600e9,
        _sources(_A100_DATASHEET, _A100_DATASHEET, _A100_DATASHEET, _A100_DATASHEET),
        aliases=("A100-PCIe",)),
    Accelerator(
        # The datasheet prints the sparse figure and says dense is one-half.
        "H100-SXM", "NVIDIA", 80 * _GB, 1979e12 / 2, 3350e9, 900e9,
        _sources(_H100_DATASHEET, _H100_DATASHEET, _H100_DATASHEET, _H100_DATASHEET),
        aliases=("H100", "H100-SXM5")),
    Accelerator(
        # Sparse figure halved, as for the SXM part.
        "H100-PCIe", "NVIDIA", 80 * _GB, 1513e12 / 2, 2000e9, 600e9,
        _sources(_H100_DATASHEET, _H100_DATASHEET, _H100_DATASHEET, _H100_DATASHEET)),
    Accelerator(
        # No per-device Infinity Fabric figure was confirmed from AMD.
        "MI300X", "AMD", 192 * _GB, 1307.4e12, 5.3e12, None,
        _sources(_ROCM_SPECS, _MI300_ARCH, _MI300_ARCH),
        aliases=("Instinct-MI300X",)),
    Accelerator(
        "TPU-v5e", "Google", 16 * _GB, 197e12, 819e9, 400e9,
        _sources(_TPU_V5E, _TPU_V5E, _TPU_V5E, _TPU_V5E),
        # Cloud TPU names v5e slices "v5litepod-N".
        aliases=("v5e", "v5litepod", "TPU-v5-lite")),
)


def _key(name: str) -> str:
    """Case, spaces, hyphens and underscores do not matter: "h100_sxm" is
    "H100-SXM"."""
    return re.sub(r"[\s_\-]+", "", name).lower()


PRESETS: Mapping[str, Accelerator] = types.MappingProxyType({a.name: a for a in _TABLE})

_BY_KEY: Dict[str, Accelerator] = {}
for _accelerator in _TABLE:
    for _name in (_accelerator.name,) + _accelerator.aliases:
        if _key(_name) in _BY_KEY:
            raise AssertionError(f"preset name {_name!r} is ambiguous")
        _BY_KEY[_key(_name)] = _accelerator
del _accelerator, _name


def names() -> List[str]:
    """The canonical preset names, in table order."""
    return [a.name for a in _TABLE]


def get(name: Union[str, Accelerator], field: str = "preset") -> Accelerator:
    """The preset called `name` (a canonical name or an alias, in any case);
    an Accelerator is returned as it is, so that callers may pass their own.

    Raises ValueError starting with `field` and listing the known presets
    for an unknown name."""
    if isinstance(name, Accelerator):
        return name
    if not isinstance(name, str):
        raise ValueError(f"{field}: expected an accelerator name, got {type(name).__name__}")
    found = _BY_KEY.get(_key(name))
    if found is None:
        raise ValueError(f"{field}: unknown accelerator {name!r}; known presets: "
                         + ", ".join(names()))
    return found


__all__ = ["Accelerator", "PRESETS", "PRECISION", "DENSE", "get", "names"]
