"""The house rules: import-linter's contracts (pyproject.toml) hold, and every test is collected."""

from __future__ import annotations

import shutil
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_no_import_runs_back_up_the_pipeline():
    lint = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    if not Path(lint).exists():
        pytest.fail("lint-imports is not installed: pip install -e '.[test]'")
    done = subprocess.run(
        [lint, "--config", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_no_import_cycles():
    """No module imports, even lazily inside a function or under TYPE_CHECKING, one that
    imports it back: a lower module that needs an upper one's function means the function
    belongs lower. Strongly connected components of grimp's graph (import-linter's own)."""
    graph = grimp.build_graph("annotune")
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    cycles = [sorted(c) for c in _components(edges) if len(c) > 1]
    assert cycles == []


def _components(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components (Kosaraju: finish order, then the reversed graph)."""
    order: list[str] = []
    seen: set[str] = set()
    for start in sorted(edges):
        if start in seen:
            continue
        seen.add(start)
        stack = [(start, iter(sorted(edges[start])))]
        while stack:
            node, targets = stack[-1]
            target = next((t for t in targets if t not in seen), None)
            if target is None:
                stack.pop()
                order.append(node)
            else:
                seen.add(target)
                stack.append((target, iter(sorted(edges[target]))))
    reverse: dict[str, set[str]] = {m: set() for m in edges}
    for source, targets in edges.items():
        for target in targets:
            reverse[target].add(source)
    components, placed = [], set()
    for root in reversed(order):
        if root in placed:
            continue
        component, todo = set(), [root]
        placed.add(root)
        while todo:
            node = todo.pop()
            component.add(node)
            for source in reverse[node] - placed:
                placed.add(source)
                todo.append(source)
        components.append(component)
    return components


def test_no_module_at_the_package_root_but_its_face_and_entry():
    modules = sorted(p.name for p in (ROOT / "annotune").glob("*.py"))
    assert modules == ["__init__.py", "__main__.py"]


def test_pytest_collects_every_test_file(pytestconfig):
    """pytest skips folders named like build outputs (`build/`, `dist/`, by `norecursedirs`)
    and files not named by `python_files`; none may hide tests. Checked against pytest's own
    settings rather than by collecting again (a second collection took 10 s of the suite)."""
    skipped_dirs = pytestconfig.getini("norecursedirs")
    test_files = pytestconfig.getini("python_files")
    hidden = []
    for path in (ROOT / "tests").rglob("test*.py"):
        folders = path.relative_to(ROOT).parts[:-1]
        in_skipped = any(fnmatch(f, pattern) for f in folders for pattern in skipped_dirs)
        unnamed = not any(fnmatch(path.name, pattern) for pattern in test_files)
        if in_skipped or unnamed:
            hidden.append(str(path.relative_to(ROOT)))
    assert pytestconfig.getini("testpaths") == ["tests"]
    assert hidden == []


MODULE_LINES = 500
CLASS_LINES = 200


def test_no_module_or_class_grows_into_several_rooms():
    """A module past 500 lines, or a class past 200, holds several concerns: split it."""
    import ast

    large = []
    for path in sorted((ROOT / "annotune").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(ROOT)
        if text.count("\n") > MODULE_LINES:
            large.append(f"{name}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > CLASS_LINES:
                    large.append(f"{name}: class {node.name}, {lines} lines")
    assert large == []


def test_the_map_names_every_folder():
    """docs/architecture.md shows each package of annotune (a folder with an __init__.py)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    packages = [
        path.parent.relative_to(ROOT / "annotune").as_posix()
        for path in (ROOT / "annotune").rglob("__init__.py")
        if path.parent != ROOT / "annotune"
    ]
    missing = [p for p in packages if f"`{p.rsplit('/', 1)[-1]}/`" not in text]
    assert missing == []
