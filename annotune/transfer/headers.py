"""A tuned header of another GPU for a device that has none: `annotune build`'s fallback.

A header tuned on an A100 is a far better start on an A30 (same architecture, sm_80) than the
annotations' defaults, and a new GPU should not fall off that cliff either. Only a GPU of the
same vendor and architecture family stands in (a header tuned for an RDNA3 card says little
about an Ampere one), the nearest by `resolve.nearest_known`; the caller says which it used.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from annotune.emit import tuned_header_path
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
