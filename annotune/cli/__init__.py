"""Command line: `annotune scan | bench | ...`. Each command lives in its own module, imported
only when that command runs (see `annotune.cli.app.COMMANDS`)."""

import os
import sys

from annotune.cli.app import EXIT_FAILED, app


def main() -> None:
    """Entry point: a bug inside annotune is reported in one line (ANNOTUNE_DEBUG=1 shows it)."""
    try:
        app()
    except Exception as error:  # typer.Exit and SystemExit never reach here (standalone mode)
        if os.environ.get("ANNOTUNE_DEBUG"):
            raise
        print(
            f"annotune: internal error: {type(error).__name__}: {error}\n"
            "note: this is a bug in annotune; rerun with ANNOTUNE_DEBUG=1 for the traceback",
            file=sys.stderr,
        )
        sys.exit(EXIT_FAILED)
