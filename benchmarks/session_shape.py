"""The session layer's shape (issue 35): its largest file and class, import cycles, and how far
one tune's options travel.

Run: `python benchmarks/session_shape.py` (the `annotune` it imports is measured: put an old
checkout first with `PYTHONPATH=/tmp/old python benchmarks/session_shape.py`). Prints a table:

* largest file / class: lines of the longest module of the package and of its longest class
  (`ast` spans, docstrings and comments included), each with its name; and the same within
  `annotune/session/`.
* import cycles: strongly connected components of more than one module in grimp's import graph
  of `annotune` (every import statement: inside functions and under `TYPE_CHECKING` too, since
  either makes the lower module know the upper one), and how many modules are in them.
* options receivers: the functions, methods and dataclass fields that are handed the tune's
  `TuneOptions` whole, found with `ast`: a parameter or field annotated `TuneOptions`, and a
  parameter named `options` of a function in a module that names `TuneOptions` (the bag under
  its usual name, unannotated); with the files they are in. A function given two or three of
  its fields does not count: that is what the issue asks for.
* options held: functions that read a field of a `TuneOptions` kept on an object
  (`self.options.budget`, `recipe.options.device`): each is one more place the whole bag
  reaches without being passed.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import grimp


def package_root() -> Path:
    import annotune

    return Path(annotune.__file__).resolve().parent


def largest(files: list[Path], root: Path) -> tuple[tuple[int, str], tuple[int, str]]:
    """The longest file and the longest class among `files`: (lines, name) each."""
    best_file, best_class = (0, ""), (0, "")
    for path in files:
        text = path.read_text()
        best_file = max(best_file, (len(text.splitlines()), str(path.relative_to(root.parent))))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                best_class = max(best_class, (lines, f"{path.stem}.{node.name}"))
    return best_file, best_class


def cycles(package: str) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    graph = grimp.build_graph(package)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            targets = edges[node]
            if i < len(targets):
                work.append((node, i + 1))
                target = targets[i]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found


def _annotated_options(annotation: ast.expr | None) -> bool:
    return annotation is not None and "TuneOptions" in ast.unparse(annotation)


def _reads_held_options(function: ast.AST) -> bool:
    return any(
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "options"
        for node in ast.walk(function)
    )


def options_receivers(files: list[Path], root: Path) -> tuple[list[str], list[str]]:
    """`file:function` for each function or dataclass field handed the whole `TuneOptions`,
    and for each function reading one kept on an object."""
    found, held = [], []
    for path in files:
        text = path.read_text()
        names_it = "TuneOptions" in text
        name = str(path.relative_to(root.parent))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args
                params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
                if any(
                    _annotated_options(a.annotation)
                    or (names_it and a.arg == "options" and a.annotation is None)
                    for a in params
                ):
                    found.append(f"{name}:{node.name}")
                if names_it and _reads_held_options(node):
                    held.append(f"{name}:{node.name}")
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and _annotated_options(item.annotation):
                        found.append(f"{name}:{node.name}.{ast.unparse(item.target)}")
    return found, held


def main() -> None:
    root = package_root()
    files = sorted(root.rglob("*.py"))
    session = [f for f in files if f.parent.name == "session"]
    (file_lines, file_name), (class_lines, class_name) = largest(files, root)
    (s_file_lines, s_file_name), (s_class_lines, s_class_name) = largest(session, root)
    found = cycles("annotune")
    receivers, held = options_receivers(files, root)
    receiver_files = {r.split(":")[0] for r in receivers}
    rows = [
        ("package", str(root)),
        ("largest file (lines)", f"{file_lines}  {file_name}"),
        ("largest class (lines)", f"{class_lines}  {class_name}"),
        ("largest session file", f"{s_file_lines}  {s_file_name}"),
        ("largest session class", f"{s_class_lines}  {s_class_name}"),
        ("import cycles (SCCs > 1)", str(len(found))),
        ("modules in cycles", str(sum(len(c) for c in found))),
        ("options: receiving functions/fields", str(len(receivers))),
        ("options: files they are in", str(len(receiver_files))),
        ("options: functions reading a held one", str(len(held))),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    for component in found:
        print("cycle:", " ".join(sorted(component)))
    if "-v" in sys.argv[1:]:
        for receiver in receivers:
            print("options ->", receiver)
        for reader in held:
            print("held options read by", reader)


if __name__ == "__main__":
    main()
