"""The layering of docs/ARCHITECTURE.md, enforced: which package may import which, the order of the
gateway's and the compact model's sub-packages, and no import circle anywhere in product code.

Every ``import`` / ``from ... import`` statement counts, at module level or inside a function (a
deferred import is still a dependency), except those under ``if TYPE_CHECKING:`` (annotations only).
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
PRODUCT = ["inkstream", "models", "encoder_service", "decoder_service", "gateway", "launcher", "client",
           "evaluation", "training"]
GENERATED = ("inkstream.common", "inkstream.encoder", "inkstream.decoder", "inkstream.gateway")

#: top-level package -> the other product packages it may import (docs/ARCHITECTURE.md, "Packages")
MAY_IMPORT = {
    "inkstream": set(),
    "models": {"inkstream"},
    "encoder_service": {"inkstream", "models"},
    "decoder_service": {"inkstream", "models"},
    "gateway": {"inkstream"},
    "launcher": {"inkstream", "models"},
    "client": {"inkstream", "launcher"},
    "evaluation": {"inkstream", "models", "client"},
    "training": {"inkstream", "models"},
}

#: inside a package, units from the bottom up: a module may import its own unit and the units below it
ORDERS = {
    "gateway": ["gateway", "gateway.types", "gateway.metrics", "gateway.tenancy", "gateway.audit", "gateway.ingest",
                "gateway.clients", "gateway.output", "gateway.routing", "gateway.config", "gateway.stores",
                "gateway.service", "gateway.scope", "gateway.jobs", "gateway.core", "gateway.session", "gateway.apis",
                "gateway.main"],
    "models": ["models", "models.base", "models.images", "models.compact.vocab", "models.compact.vocab_zh",
               "models.compact.checkpoint", "models.compact.line", "models.compact.page", "models.compact.decode",
               "models.compact.model", "models.compact.export", "models.compact.encoder_half",
               "models.compact.decoder_half", "models.compact", "models.deepseek_ocr2", "models.registry",
               "models.inprocess"],
}


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for pkg in PRODUCT:
        for path in (ROOT / pkg).rglob("*.py"):
            rel = path.relative_to(ROOT).with_suffix("")
            name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
            if not name.startswith(GENERATED):
                out[name] = path
    return out


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _imports(name: str, path: pathlib.Path, known: set[str]) -> set[str]:
    """Product modules imported by one module (a ``from P import x`` names P.x when that is a module)."""
    tree = ast.parse(path.read_text())
    skip = _type_checking_lines(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", 0) in skip:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                       for a in node.names]
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {name: _imports(name, path, set(mods)) for name, path in mods.items()}


def _unit(module: str, order: list[str]) -> int:
    best = max((u for u in order if module == u or module.startswith(u + ".")), key=len)
    return order.index(best)


def test_packages_import_only_what_the_architecture_allows():
    bad = [f"{m} imports {d}" for m, deps in _graph().items() for d in deps
           if d.split(".")[0] != m.split(".")[0] and d.split(".")[0] not in MAY_IMPORT[m.split(".")[0]]]
    assert not bad, "\n".join(sorted(bad))


def test_no_lower_unit_imports_a_higher_one():
    bad = []
    for m, deps in _graph().items():
        order = ORDERS.get(m.split(".")[0])
        if order is None:
            continue
        for d in deps:
            if d.split(".")[0] == m.split(".")[0] and _unit(d, order) > _unit(m, order):
                bad.append(f"{m} imports {d}")
    assert not bad, "\n".join(sorted(bad))


def test_no_import_circle_in_product_code():
    graph = _graph()
    state: dict[str, int] = {}
    circles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                circles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert not circles, "\n".join(" -> ".join(c) for c in circles)


def test_every_unit_of_an_order_exists():
    mods = set(_modules())
    missing = [u for order in ORDERS.values() for u in order if u not in mods]
    assert not missing, missing
