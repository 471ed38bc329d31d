"""Every command in README.md and the user guide (docs/guide/*.md) runs as written, from the
repository root, so the documentation cannot rot.

The convention, for whoever writes a page:

- Every fenced block names its language, one of `KNOWN`. `sh` blocks are commands and
  `python` blocks scripts, both run; the others (`c`, `make`, `cmake`, `toml`, `json`,
  `text`, `yaml`) are shown, not run. A fence with no
  language, or one outside `KNOWN` (`bash`, `console`, ...), fails `test_every_fence_names_
  a_known_language`, so no command hides from these tests.
- A `sh` block runs as one `bash -euo pipefail` script (a `python` block with this
  interpreter, `python -c`), in a copy of the repository root made
  once per page (the files `git ls-files` lists, untracked ones included; `../shared` beside it
  when the checkout has one), after the page's earlier blocks, each starting from the root. It
  must exit 0, and the page is allowed `PAGE_TIMEOUT_S` in all.
- HTML comments on the lines just above a fence (blank lines between allowed) mark the block:
  - `<!-- exit: N -->`: it fails on purpose and must exit N (a troubleshooting example);
  - `<!-- needs: WHAT -->`: skipped, with the reason shown, where WHAT is absent (`NEEDS`);
  - `<!-- run-by: tests/x/test_y.py -->`: too slow to run twice; that test runs it, with
    stronger checks, and must name this page in its source (checked here);
  - `<!-- ci: .ci/run runs this line -->`: each of its lines is a line of `.ci/run` (the test
    command: running it here would run this suite inside itself).
- A command's leading install steps (`python3 -m venv .venv`, `. .venv/bin/activate`,
  `pip install ...`, joined by `&&`) are not run: the tests already run in the installed
  environment. README's install steps must be what `.ci/run` does (`test_readme_installs_as_ci`).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from annotune.run.device import gpu_name

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
REPLAY = SHARED / "data" / "replay"
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs" / "guide").glob("*.md"))]
CHECKED = [*PAGES, ROOT / "docs" / "index.md"]  # fences checked; index.md shows no commands
KNOWN = {"sh", "python", "c", "make", "cmake", "toml", "json", "text", "yaml"}
RUN = {"sh", "python"}
PAGE_TIMEOUT_S = 180
FIRST_SCREEN = 30
README_MAX_LINES = 250

FENCE = re.compile(r"^ {0,3}```(.*)$")
MARK = re.compile(r"^<!--\s*(exit|needs|run-by|ci):\s*(.*?)\s*-->$")
INSTALL_STEP = re.compile(r"^(python3 -m venv \S+|\. \S+/bin/activate|pip install .+)$")


def _has_gpu() -> bool:
    return gpu_name() is not None


NEEDS = {
    "gpu": (_has_gpu, "no CUDA GPU (nvidia-smi finds none)"),
    "no-gpu": (lambda: not _has_gpu(), "a CUDA GPU is present: the command would tune on it"),
    "cmake": (lambda: shutil.which("cmake") is not None, "cmake is not installed"),
    "mkdocs": (lambda: shutil.which("mkdocs") is not None, "mkdocs is not installed"),
    "replay": (REPLAY.is_dir, f"the recorded runs are not in {REPLAY}"),
}


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: where it starts, its language, text and marks."""

    page: Path
    line: int
    language: str
    text: str
    marks: tuple[tuple[str, str], ...]

    def mark(self, key: str) -> str | None:
        return next((value for k, value in self.marks if k == key), None)

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The page's fenced blocks, each with the marks in the comments just above it."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if FENCE.match(lines[j])), None)
        assert end is not None, f"{page.relative_to(ROOT)}:{i + 1}: a fence that is not closed"
        marks, k = [], i - 1
        while k >= 0 and (not lines[k].strip() or MARK.match(lines[k].strip())):
            if lines[k].strip():
                marks.append(MARK.match(lines[k].strip()).groups())
            k -= 1
        text = "\n".join(lines[i + 1 : end]) + "\n"
        found.append(Block(page, i + 1, opening.group(1).strip(), text, tuple(reversed(marks))))
        i = end + 1
    return found


def commands(block: Block) -> list[str]:
    """The block's commands: its lines, a trailing backslash joining one to the next."""
    return [c.strip() for c in block.text.replace("\\\n", " ").splitlines() if c.strip()]


def without_install(command: str) -> tuple[list[str], str]:
    """A command's leading install steps, and what is left of it to run."""
    steps = [part.strip() for part in command.split(" && ")]
    install = []
    while steps and INSTALL_STEP.match(steps[0]):
        install.append(steps.pop(0))
    return install, " && ".join(steps)


def script(block: Block) -> str:
    return "\n".join(rest for _, rest in map(without_install, commands(block)) if rest) + "\n"


def runnable(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.language in RUN]


def _copy_of_the_repository(into: Path) -> Path:
    """The checkout's files as git sees them (tracked, and untracked but not ignored), so that
    commands that write headers or builds leave the checkout as it was."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    root = into / "annotune"
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / name)
    if SHARED.is_dir():
        (into / "shared").symlink_to(SHARED)
    return root


@dataclass
class PageRun:
    """A page's copy of the repository and how far through its blocks the tests have got."""

    root: Path
    started: float
    done: int = 0
    outcomes: dict[int, str] = field(default_factory=dict)


_RUNS: dict[Path, PageRun] = {}


def _environment() -> dict[str, str]:
    """This interpreter's environment, with its scripts (annotune, mkdocs) first on PATH."""
    scripts = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}"}


def _skip_reason(block: Block) -> str | None:
    needs = block.mark("needs")
    if needs is not None:
        assert needs in NEEDS, f"{block.where}: unknown need {needs!r}; known: {sorted(NEEDS)}"
        present, absent = NEEDS[needs]
        if not present():
            if needs == "replay" and os.environ.get("CI", "").lower() == "true":
                raise AssertionError(f"{block.where}: {absent} (CI=true: the data must be present)")
            return f"{block.where}: {absent}"
    return None


def _run(block: Block, run: PageRun) -> str:
    """Run one block in the page's copy; the outcome, or a failed assertion."""
    test = block.mark("run-by")
    if test:
        source = (ROOT / test).read_text(encoding="utf-8")
        assert str(block.page.relative_to(ROOT)) in source, f"{block.where}: {test} must read it"
        return f"run by {test}"
    if block.mark("ci"):
        missing = [c for c in commands(block) if c not in _ci_lines()]
        assert not missing, f"{block.where}: not in .ci/run: {missing}"
        return "run by .ci/run"
    reason = _skip_reason(block)
    if reason:
        return f"skip: {reason}"
    left = PAGE_TIMEOUT_S - (time.monotonic() - run.started)
    assert left > 0, f"{block.where}: the page's commands took over {PAGE_TIMEOUT_S} s"
    expected = int(block.mark("exit") or 0)
    argv = (
        [sys.executable, "-c", block.text]
        if block.language == "python"
        else ["bash", "-euo", "pipefail", "-c", script(block)]
    )
    done = subprocess.run(
        argv,
        cwd=run.root,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=left,
        check=False,
    )
    assert done.returncode == expected, (
        f"{block.where}: exit code {done.returncode}, documented {expected}\n"
        f"{argv[-1]}--- stdout\n{done.stdout[-3000:]}--- stderr\n{done.stderr[-3000:]}"
    )
    return "ran"


def _cases() -> list:
    """One case per block, a page's blocks in one xdist worker (`--dist loadgroup`): a worker
    given a later block alone runs the page's earlier ones first, and two workers sharing a
    page would each run them. Each is `slow` (whole tunes, as a reader runs them): CI runs
    them as its second step, `python -m pytest -m slow`."""
    return [
        pytest.param(
            page,
            index,
            id=f"{page.relative_to(ROOT)}:{block.line}",
            marks=[pytest.mark.xdist_group(f"docs:{page.relative_to(ROOT)}"), pytest.mark.slow],
        )
        for page in PAGES
        for index, block in enumerate(runnable(page))
    ]


@pytest.mark.parametrize("page, index", _cases())
def test_the_command_runs_as_written(page, index, tmp_path_factory):
    """Blocks run in page order; one selected alone runs the page's earlier blocks first."""
    if page not in _RUNS:
        into = tmp_path_factory.mktemp(page.stem)
        _RUNS[page] = PageRun(_copy_of_the_repository(into), time.monotonic())
    run = _RUNS[page]
    page_blocks = runnable(page)
    while run.done <= index:
        run.done += 1  # a block that fails is not run again for the next one
        run.outcomes[run.done - 1] = _run(page_blocks[run.done - 1], run)
    outcome = run.outcomes[index]
    if outcome.startswith("skip: "):
        pytest.skip(outcome.removeprefix("skip: "))


@pytest.mark.parametrize("page", CHECKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_fence_names_a_known_language(page):
    for block in blocks(page):
        assert block.language in KNOWN, (
            f"{block.where}: fence language {block.language!r}; use one of {sorted(KNOWN)} "
            "(`sh` for commands, which the tests run)"
        )
        for key, value in block.marks:
            if key == "exit":
                assert value.isdigit() and block.language == "sh", f"{block.where}: exit {value}"


def test_the_examples_of_a_page_are_found():
    """The parser sees what a reader sees: the marks, the joined lines, the install steps."""
    (first, tests, *_) = runnable(README)
    install, rest = without_install(commands(first)[0])
    assert install[-1].startswith("pip install") and rest.startswith("annotune tune ")
    assert tests.mark("ci") and commands(tests) == ["python -m pytest", "python -m pytest -m slow"]
    build = {b.mark("run-by"): b for b in runnable(ROOT / "docs/guide/build.md")}
    assert len(commands(build["tests/cli/test_build_env.py"])) == 3  # a continued line joined
    failing = [b for b in runnable(ROOT / "docs/guide/troubleshooting.md") if b.mark("exit")]
    assert [b.mark("exit") for b in failing] == ["2", "1"]
    assert failing[1].marks == (("needs", "no-gpu"), ("exit", "1"))  # two marks, in order


def _ci_lines() -> list[str]:
    return [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]


def _pip_install(command: str) -> list[str]:
    """A `pip install` command's words, as `python -m pip install --quiet` would run it."""
    words = shlex.split(command)
    if words[:2] == ["python", "-m"]:
        words = words[2:]
    return [w for w in words if w != "--quiet"]


def test_readme_installs_as_ci():
    """README's first command installs exactly what CI installs, the same way."""
    install, _ = without_install(commands(runnable(README)[0])[0])
    ci = _ci_lines()
    venv, activate, pip = install
    assert venv in ci and activate in ci
    ci_installs = [_pip_install(line) for line in ci if "pip install" in line and " -e " in line]
    assert ci_installs == [_pip_install(pip)]


def test_readme_is_a_front_door():
    """At most `README_MAX_LINES` lines; the install-and-tune command and the test command in
    the first screen."""
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES
    first = [b for b in runnable(README) if b.line <= FIRST_SCREEN]
    assert len(first) >= 2
    install, tune = without_install(commands(first[0])[0])
    assert install and tune.startswith("annotune tune examples/")
    assert commands(first[1]) == ["python -m pytest", "python -m pytest -m slow"]


LINK = re.compile(r"\]\(([^)#\s]+\.md)(#[^)\s]*)?\)")


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub (and mkdocs' default toc) makes it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_readme_links_into_the_guide_resolve():
    """mkdocs checks the guide's own links; README's are checked here, as GitHub resolves
    them: relative to the repository root, anchors from the headings."""
    for target, anchor in LINK.findall(README.read_text(encoding="utf-8")):
        path = ROOT / target
        assert path.is_file(), target
        if anchor:
            headings = [
                _slug(line.lstrip("#"))
                for line in path.read_text(encoding="utf-8").splitlines()
                if line.startswith("#")
            ]
            assert anchor[1:] in headings, f"{target}{anchor}"


@pytest.mark.skipif(shutil.which("mkdocs") is None, reason="mkdocs is not installed")
def test_the_guide_builds_without_a_warning(tmp_path):
    done = subprocess.run(
        ["mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=_environment(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr
    assert (tmp_path / "site" / "guide" / "tune" / "index.html").is_file()
