"""One home for a box's centre (models/compact/page/boxes.py): the page steps had their own copies
(band_panels ``_cy`` / ``_cx``, xycut ``_cy``, table ``_centre_y``), free to drift apart."""

from __future__ import annotations

import ast
import pathlib

import numpy as np

from models.compact.page.boxes import LineBox, centre_x, centre_y

PAGE = pathlib.Path(__file__).resolve().parents[2] / "models" / "compact" / "page"


def test_centres_of_a_box():
    ln = LineBox(np.zeros((4, 2), np.float32), (10.0, 20.0, 50.0, 26.0), 0.9)
    assert (centre_x(ln), centre_y(ln)) == (30.0, 23.0)


def _is_centre_helper(fn: ast.FunctionDef) -> bool:
    """A function whose body returns ``(x.box[i] + x.box[j]) / 2``: a centre of its argument's box."""
    body = [st for st in fn.body if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.Return):
        return False
    v = body[0].value
    return (isinstance(v, ast.BinOp) and isinstance(v.op, ast.Div) and isinstance(v.left, ast.BinOp)
            and isinstance(v.left.op, ast.Add)
            and all(isinstance(s, ast.Subscript) and isinstance(s.value, ast.Attribute) and s.value.attr == "box"
                    for s in (v.left.left, v.left.right)))


def test_no_page_step_defines_its_own_centre():
    copies = [f"{path.name}:{fn.name}" for path in sorted(PAGE.glob("*.py")) if path.name != "boxes.py"
              for fn in ast.walk(ast.parse(path.read_text())) if isinstance(fn, ast.FunctionDef)
              and _is_centre_helper(fn)]
    assert not copies, f"use models.compact.page.boxes.centre_x / centre_y: {copies}"
