"""The report's notes the finish adds: a knob only a kernel's declaration names reaches no code
of the program, so the header alone cannot give the program the tuned value."""

from __future__ import annotations

from pathlib import Path

from annotune.annotate import read_problem
from annotune.session.finish import _kernel_only

VENDORED = Path(__file__).resolve().parents[2] / "examples" / "cuda" / "vendored"


def test_a_kernel_only_knob_is_said_with_the_winners_instance():
    problem = read_problem(VENDORED / "smooth.cu")
    (note,) = _kernel_only(problem, {"BT": 512})
    assert note.startswith("BT reaches the code only through the declared kernel")
    assert "smooth<float, 512>" in note
    assert _kernel_only(read_problem(VENDORED / "scale.cu"), {"TILE": 64}) == ()
