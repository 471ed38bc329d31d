"""Runners: turn row indices of a search space into measurements (`Measure` callables)."""

from annotune.run.replay import ReplayDataset, load_replay

__all__ = ["ReplayDataset", "load_replay"]
