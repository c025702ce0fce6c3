"""The shape of the runtime's code: small classes, composed rather than mixed in, types checked.

A class of more than :data:`MOST_METHODS` methods holds several concerns; a class built from
several of the project's own classes shares one bag of state between files (the node was once
``Node(Hosting, Routing, Failover, Fanout, Lobby)`` over 52 fields). Both are read from the
source with ``ast``. The type checker (``python3 -m tests.typecheck``) runs here too, so the test
command proves every attribute a component reads exists.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests import typecheck

ROOT = Path(__file__).resolve().parent.parent
MOST_METHODS = 40


def classes() -> list[tuple[Path, ast.ClassDef]]:
    """Every class defined in ``server/``, with its file."""
    return [
        (path, node)
        for path in sorted((ROOT / "server").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        if isinstance(node, ast.ClassDef)
    ]


def methods(cls: ast.ClassDef) -> int:
    """The functions defined in the class's own body."""
    return sum(isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) for item in cls.body)


def test_no_class_of_the_runtime_has_more_than_forty_methods() -> None:
    large = [
        f"{path.relative_to(ROOT)}:{cls.lineno} {cls.name} has {methods(cls)} methods"
        for path, cls in classes()
        if methods(cls) > MOST_METHODS
    ]
    assert large == []


def test_no_class_of_the_runtime_inherits_from_two_of_its_classes() -> None:
    own = {cls.name for _, cls in classes()}
    mixed = [
        f"{path.relative_to(ROOT)}:{cls.lineno} {cls.name}({', '.join(bases)})"
        for path, cls in classes()
        if len(bases := [ast.unparse(base) for base in cls.bases if ast.unparse(base) in own]) > 1
    ]
    assert mixed == []


def test_the_counters_see_what_they_count() -> None:
    sample = ast.parse(
        "class A(B, C):\n    def f(self): ...\n    async def g(self): ...\n    x = 1\n"
    )
    (cls,) = [node for node in ast.walk(sample) if isinstance(node, ast.ClassDef)]
    assert methods(cls) == 2
    assert [ast.unparse(base) for base in cls.bases] == ["B", "C"]


def test_the_runtime_the_protocol_and_the_engines_type_check() -> None:
    result = typecheck.run([])
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
