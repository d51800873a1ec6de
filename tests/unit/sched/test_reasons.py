"""Every pending-reason word is declared once (ctld/sched/reasons.py); the rest of ctld names it from there."""

from __future__ import annotations

import ast
from pathlib import Path

from ctld.sched import reasons

CTLD = Path(__file__).resolve().parents[3] / "ctld"
# words that also mean something else in ctld (a field name, a user's input) are not checked
ALSO_OTHER_WORDS = {reasons.NONE, reasons.PRIORITY}


def _literals(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    }


def test_no_module_of_ctld_spells_a_reason_itself() -> None:
    words = {value for name, value in vars(reasons).items() if name.isupper() and isinstance(value, str)}
    words -= ALSO_OTHER_WORDS
    spelled = {
        f"{path.relative_to(CTLD.parent)}: {word}"
        for path in CTLD.rglob("*.py")
        if path.name != "reasons.py"
        for word in _literals(path) & words
    }
    assert not spelled, "use ctld.sched.reasons instead of: " + ", ".join(sorted(spelled))
