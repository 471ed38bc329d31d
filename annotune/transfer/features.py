"""Device features: numbers that describe a GPU, so that tuning data can move between GPUs.

Architecture-adaptive tuning (Muralidharan et al., "Architecture-Adaptive Code Variant Tuning",
ASPLOS 2016, §2-3) learns from measurements on *source* GPUs and predicts for a *target* GPU by
appending each GPU's device features to the inputs of one model (feature concatenation, §3.1).
The features must therefore mean the same on every GPU and come from where the paper takes them
(§2): what the driver reports (their deviceQuery features) and published specifications (their
"static" features). Both sources are here: `lookup` reads the table of published
specifications in `annotune/transfer/gpus.toml` (source "table"), and
`live_device.read_from_device` asks the live GPU (source "device"). `live_device.features_for`
picks the live GPU when a name is this machine's GPU, else the table; `annotune.transfer.resolve`
adds the user's table and the fallback for a GPU known nowhere. Every value follows the
conventions written at the top of gpus.toml, so a table entry and a live reading of the same
GPU agree.

Where we deviate from the paper's 13 features (Table 1), and why:

* Added: `vendor_nvidia` and `compute_capability` (the generation: §6.1 finds the largest
  changes in the best variant across generations), `multiprocessors` (parallelism, §6.1) and
  `registers_per_block`.
* `shared_per_block_kib` is the opt-in maximum one block may use, not the 48 KiB default that
  deviceQuery prints: the default is the same on every NVIDIA GPU since Fermi (Table 1 shows 48
  on all six GPUs) and so tells the GPUs apart not at all.
* Dropped: global memory size and copy engines (they decide whether a problem fits and how
  transfers overlap, not how fast a kernel runs), and the two atomic-latency microbenchmarks
  (their "custom" features: they need the GPU itself, which the replay datasets' GPUs are not).
* Device feature selection (P-DFS, CV-DFS, §3.3-3.4) is left to `annotune.transfer.adapt`:
  which ones matter depends on the kernel (§2, Table 2).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from annotune.results.replay import ReplayDataset

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FEATURE_NAMES: tuple[str, ...] = (
    "vendor_nvidia",
    "compute_capability",
    "multiprocessors",
    "cores",
    "core_clock_mhz",
    "memory_clock_mhz",
    "memory_bus_bits",
    "memory_bandwidth_gbs",
    "l2_kib",
    "shared_per_block_kib",
    "registers_per_block",
    "peak_sp_gflops",
    "peak_dp_gflops",
)
"""The numeric features, in the order of `DeviceFeatures.vector()`; units in gpus.toml."""

SOURCES = ("table", "device", "user", "stand-in")
"""Where features come from: published specifications, the GPU itself, the user's own table
(`--gpus`, `[[gpu]]` in annotune.toml), or another GPU standing in for an unknown one
(`annotune.transfer.resolve`)."""


@dataclass(frozen=True)
class DeviceFeatures:
    """One GPU's features: `values` holds every FEATURE_NAMES key (more are allowed) as a float.

    `name` is the GPU's canonical name (the table's, or what the driver reports) and
    `architecture` its generation in words, e.g. "Ampere (sm_80)" or "CDNA2 (gfx90a)".
    The values are copied and read-only.
    """

    name: str
    architecture: str
    values: Mapping[str, float] = field(hash=False)
    source: str

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, not {self.source!r}")
        missing = [n for n in FEATURE_NAMES if n not in self.values]
        if missing:
            raise ValueError(f"{self.name}: missing device features {', '.join(missing)}")
        values = {str(k): float(v) for k, v in self.values.items()}
        infinite = [k for k, v in values.items() if not math.isfinite(v)]
        if infinite:
            raise ValueError(f"{self.name}: device features must be finite: {infinite}")
        object.__setattr__(self, "values", MappingProxyType(values))

    def vector(self, names: Sequence[str] = FEATURE_NAMES) -> np.ndarray:
        """The values of `names`, in that order, as float64."""
        return np.array([self.values[n] for n in names], dtype=np.float64)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "architecture": self.architecture,
            "source": self.source,
            "values": dict(self.values),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DeviceFeatures:
        """The inverse of `to_json`; ValueError when `data` is not such an object."""
        try:
            return cls(
                name=str(data["name"]),
                architecture=str(data["architecture"]),
                values=dict(data["values"]),
                source=str(data["source"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not a device-features object ({error})") from None


def lookup(name: str) -> DeviceFeatures | None:
    """The published specifications of the GPU called `name`, or None when the table lacks it.

    Names are compared after dropping case, punctuation, spacing and vendor or brand words
    ("NVIDIA", "GeForce", "Tesla", "AMD", "Radeon", "Instinct"), so "NVIDIA A100-PCIE-40GB",
    "a100 pcie 40gb" and "A100-PCIe-40GB" are one GPU. Exact names are tried first, then the
    aliases; a short name that fits several boards ("A100", "H100") is an alias of the default
    variant documented in gpus.toml.
    """
    key = name_key(name)
    if not key:
        return None
    names, aliases = _index()
    return names.get(key) or aliases.get(key)


def table() -> tuple[DeviceFeatures, ...]:
    """Every GPU of the table, in its order."""
    names, _ = _index()
    return tuple(names.values())


def dataset_device(dataset: ReplayDataset) -> str:
    """The GPU a results file was measured on: as the file says, else its name's last part
    ("convolution_MI250X" -> "MI250X": some Kernel Tuner caches leave the device empty)."""
    return dataset.device or dataset.name.rsplit("_", 1)[-1]


def dataset_features(dataset: ReplayDataset) -> DeviceFeatures | None:
    """The device features of a results file's GPU: from the file (T4 metadata written by
    `annotune export`), else the table's for the name it gives or its name's last part.
    None when neither is known; ValueError when the file's own features are malformed."""
    if dataset.device_features is not None:
        return DeviceFeatures.from_json(dataset.device_features)
    for name in (dataset.device, dataset.name.rsplit("_", 1)[-1]):
        found = lookup(name) if name else None
        if found is not None:
            return found
    return None


# --- the table ---

_VENDOR_WORDS = frozenset(
    {"nvidia", "geforce", "tesla", "quadro", "amd", "ati", "radeon", "instinct"}
)
_MARKS = re.compile(r"\((?:r|tm|c)\)|[®™©]")
_WORDS = re.compile(r"[a-z]+|[0-9]+")
_ENTRY_KEYS = frozenset({"name", "aliases", "architecture", *FEATURE_NAMES})


def name_key(name: str) -> str:
    """The comparable form of a GPU name: "NVIDIA A100-PCIE-40GB" -> "a 100 pcie 40 gb".

    Letters and digits are split apart, so "80GB" and "80 GB" (or "A100PCIE") agree.
    """
    words = _WORDS.findall(_MARKS.sub(" ", name.lower()))
    return " ".join(w for w in words if w not in _VENDOR_WORDS)


@cache
def _index() -> tuple[dict[str, DeviceFeatures], dict[str, DeviceFeatures]]:
    """gpus.toml by the key of each exact name, and by the key of each alias.

    A broken table is a bug in annotune, not a user error: ValueError, caught by the tests.
    """
    text = resources.files("annotune.transfer").joinpath("gpus.toml").read_text(encoding="utf-8")
    names: dict[str, DeviceFeatures] = {}
    aliases: dict[str, DeviceFeatures] = {}
    for entry in tomllib.loads(text)["gpu"]:
        unknown = set(entry) - _ENTRY_KEYS
        if unknown:
            raise ValueError(f"gpus.toml: {entry.get('name')}: unknown keys {sorted(unknown)}")
        features = DeviceFeatures(
            name=entry["name"],
            architecture=entry["architecture"],
            values={n: entry[n] for n in FEATURE_NAMES if n in entry},
            source="table",
        )
        words = [(names, entry["name"])] + [(aliases, a) for a in entry.get("aliases", [])]
        for index, word in words:
            key = name_key(word)
            if key in names or key in aliases:
                raise ValueError(f"gpus.toml: {word!r} names more than one entry")
            index[key] = features
    return names, aliases


# --- the live GPU ---
