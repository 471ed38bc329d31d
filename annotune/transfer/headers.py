"""The committed tuned headers of other GPUs, for `annotune build`.

A header tuned on an A100 is a far better start on an A30 (same architecture, sm_80) than the
annotations' defaults, and a new GPU should not fall off that cliff either. Only a GPU of the
same vendor and architecture family stands in (a header tuned for an RDNA3 card says little
about an Ampere one), the nearest by `resolve.nearest_known`; the caller says which it used.

`arch_gpus` gathers every GPU's header with its compute capability, for the header that one
binary built for several architectures includes (`emit.arch`, `annotune build --per-arch`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from annotune.core.diagnostics import AnnotuneError
from annotune.emit import header_name, tuned_header_path
from annotune.emit.arch import ArchGpu, parse_tuned_header
from annotune.transfer.resolve import Family, GpuTable, nearest_known, resolve


@dataclass(frozen=True)
class HeaderStandIn:
    """The tuned header of `device`, standing in for the asked device's; `warning` says so."""

    header: Path
    device: str
    warning: str


def stand_in_header(
    source: Path, device: str, out_dir: Path | None, gpus: GpuTable | None = None
) -> HeaderStandIn | None:
    """The tuned header of `source` for the known GPU nearest to `device` among those with
    one (`tuned/<slug>/<stem>.h`, a slug read as a GPU name), of the same vendor and
    architecture family; None when there is none or `device`'s family is unknown."""
    target = resolve(device, gpus, live=False)
    generation = target.architecture.split(" (")[0]
    if "vendor_nvidia" not in target.values or target.architecture == "unknown":
        return None
    vendor = "NVIDIA" if target.values["vendor_nvidia"] else "AMD"
    family = Family(vendor, target.architecture, target.values.get("compute_capability"))
    own = tuned_header_path(source, device, out_dir)
    base = own.parent.parent
    headers = {}
    try:
        directories = sorted(base.iterdir()) if base.is_dir() else []
    except OSError:
        return None
    for directory in directories:
        header = directory / own.name
        if directory == own.parent or not header.is_file():
            continue
        known = resolve(directory.name, gpus, live=False)
        features = known.features() if known.source in ("user", "table") else None
        if features is not None and features.architecture.split(" (")[0] == generation:
            headers[features.name] = (features, header)
    nearest = nearest_known(device, family, (f for f, _ in headers.values()))
    if nearest is None:
        return None
    header = headers[nearest.name][1]
    warning = (
        f"no tuned header for device '{device}'; using the one tuned for '{nearest.name}' "
        f"({header}), the nearest GPU of the same vendor and architecture ({generation})"
    )
    return HeaderStandIn(header, nearest.name, warning)


@dataclass(frozen=True)
class ArchGpus:
    """Every tuned header of a source with its GPU's compute capability, by directory name;
    `warnings` say each capability not known for sure and each header left out."""

    directory: Path
    gpus: tuple[ArchGpu, ...]
    warnings: tuple[str, ...]


def arch_gpus(source: Path, out_dir: Path | None, gpus: GpuTable | None = None) -> ArchGpus:
    """The tuned headers of the CUDA source `source` (`<out_dir>/<slug>/<stem>.h`), each read
    back (`emit.arch.parse_tuned_header`: AnnotuneError for one annotune did not write) and
    given its GPU's compute capability: from the user's table, the shipped one, else what the
    GPU's name tells or the nearest known GPU's (`resolve.resolve`, said in a warning). A GPU
    with no NVIDIA compute capability (an AMD one, a CPU) is left out with a warning."""
    base = tuned_header_path(source, "any", out_dir).parent.parent
    try:
        directories = sorted(base.iterdir()) if base.is_dir() else []
    except OSError as error:
        raise AnnotuneError(f"cannot list the tuned headers in {base}: {error}") from None
    found, warnings = [], []
    for directory in directories:
        header = directory / header_name(source)
        if not header.is_file():
            continue
        tuned = parse_tuned_header(header, source.name)
        known = resolve(tuned.device, gpus, live=False)
        capability = known.values.get("compute_capability")
        if not known.values.get("vendor_nvidia") or capability is None:
            warnings.append(
                f"{header} is tuned for '{tuned.device}', which has no known NVIDIA compute "
                "capability: left out (add the GPU with --gpus FILE or a [[gpu]] entry in "
                "annotune.toml)"
            )
            continue
        tenths = round(capability * 10)
        entry = gpus.find(tuned.device) if gpus else None
        told = entry is not None and "compute_capability" in entry.values
        if known.source not in ("user", "table", "device") and not told:
            how = f"'{known.stand_in}', the nearest known GPU"
            if "compute_capability" not in known.missing:
                how = "its name"
            warnings.append(
                f"'{tuned.device}' ({header}) is in no GPU table: its compute capability, "
                f"{tenths // 10}.{tenths % 10}, comes from {how} (add it with --gpus FILE or "
                "a [[gpu]] entry in annotune.toml)"
            )
        found.append(ArchGpu(tuned, (tenths // 10, tenths % 10)))
    return ArchGpus(base, tuple(found), tuple(warnings))
