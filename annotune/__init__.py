"""annotune: autotune the knobs marked in CUDA and OpenACC source."""

__version__ = "0.1.0"
