"""The rewritten copies are found before the originals, whatever spelling the command uses."""

from __future__ import annotations

from pathlib import Path

from annotune.builder.variants import VariantSource, copies_first


def test_every_spelling_of_an_include_directory_gets_its_copies_first(tmp_path):
    root = tmp_path / "project"
    variant = VariantSource({}, (), {"inc/conf.h": b"", "k.c": b""}, True, root, "k.c")
    copies = Path("/scratch/src")
    argv = ["gcc", "-I", str(root / "inc"), f"-I{root / 'inc'}",
            f"--include-path={root / 'inc'}", "-isystem", str(root / "inc"),
            "-I", str(tmp_path / "elsewhere"), "k.c"]  # fmt: skip
    assert copies_first(argv, variant, copies) == [
        "gcc",
        "-I", "/scratch/src/inc", "-I", str(root / "inc"),
        "-I/scratch/src/inc", f"-I{root / 'inc'}",
        "--include-path=/scratch/src/inc", f"--include-path={root / 'inc'}",
        "-isystem", "/scratch/src/inc", "-isystem", str(root / "inc"),
        "-I", str(tmp_path / "elsewhere"),
        "k.c",
    ]  # fmt: skip
