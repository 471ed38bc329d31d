"""Command line: `annotune scan | bench | ...`. Each command lives in its own module."""

from annotune.cli import scan  # noqa: F401  (registers the command)
from annotune.cli.app import app


def main() -> None:
    app()
