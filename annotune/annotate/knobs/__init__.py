"""The knobs of a source: every annotation of the parsed files read into a checked `Problem`
(`collector`), from the scan of each file's directives (`scan`), its pragmas (`pragmas`) and
its config (`config_knobs`, with a scanner of C declarations: `c_declarations`), each knob's
uses (`uses`) and the state the reading holds (`state`)."""

from __future__ import annotations

from annotune.annotate.knobs.collector import collect
from annotune.annotate.knobs.scan import defined_number, is_annotation

__all__ = ["collect", "defined_number", "is_annotation"]
