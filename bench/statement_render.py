"""Seeded statement-like table pages for ``bench/statements.py`` (its docstring lists the kinds).

:func:`render_statement` draws, with Pillow, a US-letter page at the page's dpi (150-300) and returns
a :class:`StatementPage`: the image, its dpi, the body cells' texts (labels and values, empty cells
left out), the number cells among them with their row labels, skew (degrees) and whether scan noise was added.
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass, field

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

KINDS = ("statement", "swiss", "invoice", "zh", "twocol")
SERIF = ("/usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf",
         "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf")
SANS = ("/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf")
ZH = ("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc#2",
      "/usr/share/fonts/opentype/noto/NotoSerifCJK-Regular.ttc#2")
EN_LABELS = ("Revenue", "Cost of sales", "Distribution costs", "Administrative expenses", "Other income",
             "Finance costs", "Share of profit of associates", "Income tax", "Property, plant and equipment",
             "Intangible assets", "Inventories", "Trade receivables", "Cash and cash equivalents",
             "Borrowings", "Lease liabilities", "Provisions", "Deferred tax", "Goodwill", "Share capital",
             "Retained earnings", "Trade payables", "Accrued expenses", "Investment property")
SECTIONS = ("Current assets", "Non-current assets", "Current liabilities", "Operating activities", "Equity")
ZH_LABELS = ("营业收入", "营业成本", "销售费用", "管理费用", "研发费用", "财务费用", "利息费用", "利息收入",
             "投资收益", "公允价值变动收益", "信用减值损失", "营业利润", "营业外收入", "所得税费用", "货币资金",
             "应收账款", "存货", "固定资产", "无形资产", "短期借款", "应付账款", "合同负债", "未分配利润")
ITEMS = ("Consulting services", "Licence fee (annual)", "Travel expenses", "Hardware maintenance", "Training day",
         "Cloud hosting", "Support package", "Data migration", "Printing", "Shipping and handling")
THIN = "\u2009"


@dataclass
class StatementPage:
    kind: str
    image: Image.Image
    dpi: int
    cells: list[str] = field(default_factory=list)
    numbers: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)  # the row label of each of ``numbers``
    skew: float = 0.0
    noisy: bool = False


def _font(spec: str, px: int) -> ImageFont.FreeTypeFont:
    path, _, idx = spec.partition("#")
    return ImageFont.truetype(path, px, index=int(idx or 0))


def _group(n: int, sep: str) -> str:
    s = f"{n:,}"
    return s.replace(",", sep)


def amount(rng: random.Random, sep: str = ",", dec: bool = False, parens: bool = True, big: int = 6) -> str:
    """A right-column amount: grouped by ``sep``, maybe decimals, negatives in parentheses."""
    v = rng.randint(1, 10 ** rng.randint(2, big))
    s = _group(v, sep) + (f".{rng.randint(0, 99):02d}" if dec else "")
    if parens and rng.random() < 0.25:
        s = f"({s})"
    elif rng.random() < 0.08:
        s = "-"
    return s


def _draw_table(draw, rng, x0: float, y0: float, widths: list[float], header: list[list[tuple[str, int]]],
                rows: list[dict], font, bold, page: StatementPage, row_h: float) -> float:
    """Draw a header (rows of (text, span)) and body rows (``label``, ``indent``, ``values``, ``style``);
    label column left-aligned, others right-aligned, the font made smaller until every cell fits its
    column with a gap (no text overlaps another). Appends truth to ``page``; returns the y after."""
    while not _fits(widths, rows, font, row_h) and font.size > 8:
        font = bold = ImageFont.truetype(font.path, int(font.size * 0.92), index=font.index)
    xs = [x0]
    for w in widths:
        xs.append(xs[-1] + w)
    pad = row_h * 0.25
    y = y0
    for hrow in header:
        c = 0
        for text, span in hrow:
            if text:
                tw = bold.getlength(text)
                x = (xs[c] + xs[c + span]) / 2 - tw / 2 if c else xs[0]
                draw.text((x, y), text, font=bold, fill=(0, 0, 0))
                if span > 1:
                    draw.line([(xs[c] + pad, y + row_h * 0.95), (xs[c + span] - pad, y + row_h * 0.95)],
                              fill=(0, 0, 0), width=max(1, int(row_h / 22)))
            c += span
        y += row_h * 1.15
    draw.line([(xs[0], y), (xs[-1], y)], fill=(0, 0, 0), width=max(1, int(row_h / 18)))
    y += row_h * 0.3
    for r in rows:
        f = bold if r["style"] in ("heading", "total") else font
        if r["style"] in ("subtotal", "total"):
            for c in range(1, len(widths)):
                if r["values"][c - 1]:
                    draw.line([(xs[c] + pad * 2, y - 2), (xs[c + 1] - pad, y - 2)], fill=(0, 0, 0), width=1)
        draw.text((xs[0] + r["indent"] * row_h * 1.1, y), r["label"], font=f, fill=(0, 0, 0))
        page.cells.append(r["label"])
        for c, v in enumerate(r["values"], start=1):
            if not v:
                continue
            draw.text((xs[c + 1] - pad - f.getlength(v), y), v, font=f, fill=(0, 0, 0))
            page.cells.append(v.replace(THIN, " "))
            if any(ch.isdigit() for ch in v) and r.get("numeric", [True] * 99)[c - 1]:
                page.numbers.append(v.replace(THIN, " "))
                page.labels.append(r["label"])
        y += row_h
        if r["style"] == "total":
            for c in range(1, len(widths)):
                if r["values"][c - 1]:
                    for dy in (-row_h * 0.12, -row_h * 0.04):
                        draw.line([(xs[c] + pad * 2, y + dy), (xs[c + 1] - pad, y + dy)], fill=(0, 0, 0))
    return y


def _fits(widths: list[float], rows: list[dict], font, row_h: float) -> bool:
    """Whether every label (with its indent) and value fits its column, leaving a gap of a third of a row."""
    gap = row_h / 3
    for r in rows:
        if r["indent"] * row_h * 1.1 + font.getlength(r["label"]) + gap > widths[0]:
            return False
        if any(font.getlength(v) + gap > w for v, w in zip(r["values"], widths[1:], strict=False)):
            return False
    return True


def _statement_rows(rng: random.Random, n_cols: int, kind: str) -> list[dict]:
    rows: list[dict] = []
    zh = kind == "zh"
    labels = list(ZH_LABELS if zh else EN_LABELS)
    rng.shuffle(labels)
    for _ in range(rng.randint(2, 3)):
        head = rng.choice(("其中：", "流动资产：", "流动负债：")) if zh else rng.choice(SECTIONS)
        rows.append({"label": head, "indent": 0, "values": [""] * n_cols, "style": "heading"})
        for i in range(rng.randint(3, 6)):
            lab = labels.pop() if labels else "Other"
            if not zh and rng.random() < 0.15:
                lab += " (a)"
            vals = []
            for c in range(n_cols):
                v = amount(rng)
                if kind == "statement" and c < n_cols - 1 and i == 0 and rng.random() < 0.5:
                    v = "$" + v if v[0].isdigit() else v
                if rng.random() < 0.08 and v != "-":
                    v += "*"
                vals.append(v)
            rows.append({"label": lab, "indent": 1 + (i % 3 == 2), "values": vals, "style": "normal"})
        rows.append({"label": "合计" if zh else "Total " + rows[-i - 2]["label"].lower().rstrip("："),
                     "indent": 0, "values": [amount(rng, parens=False, big=7) for _ in range(n_cols)],
                     "style": "subtotal"})
    rows.append({"label": "总计" if zh else "Net total", "indent": 0,
                 "values": [("" if zh else "$") + amount(rng, parens=False, big=7) for _ in range(n_cols)],
                 "style": "total"})
    return rows


def render_statement(kind: str, rng: random.Random) -> StatementPage:
    """A seeded page of ``kind`` (one of :data:`KINDS`). Raises ValueError for an unknown kind."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}")
    dpi = rng.choice((150, 200, 240, 300))
    w, h = int(8.5 * dpi), int(11 * dpi)
    img = Image.new("RGB", (w, h), "white")
    draw = ImageDraw.Draw(img)
    page = StatementPage(kind, img, dpi)
    pt = rng.uniform(8.5, 11) * dpi / 72
    font = _font(rng.choice(ZH if kind == "zh" else SERIF + SANS), int(pt))
    bold = font
    row_h = pt * rng.uniform(1.45, 1.8)
    m = dpi * 0.8
    title = {"statement": "Consolidated statement of financial position", "swiss": "Jahresrechnung / Comptes annuels",
             "invoice": "INVOICE No. " + str(rng.randint(1000, 99999)), "zh": "合并利润表（单位：人民币元）",
             "twocol": "Schedule of balances by account"}[kind]
    draw.text((m, m), title, font=_font(ZH[0] if kind == "zh" else SANS[0], int(pt * 1.3)), fill=(0, 0, 0))
    y0 = m + pt * 3.5
    usable = w - 2 * m
    if kind in ("statement", "zh"):
        n = rng.choice((2, 3)) if kind == "statement" else 2
        note = kind == "statement"
        years = [str(2024 - i) for i in range(n)]
        if kind == "zh":
            header = [[("", 1), ("2024年", 2), ("2023年", 2)], [("项目", 1)] + [("金额", 1), ("占比", 1)] * 2]
            rows = _statement_rows(rng, 2, kind)
            for r in rows:
                v = r["values"]
                r["values"] = [v[0], f"{rng.uniform(0, 60):.2f}%" if v[0] else "", v[1],
                               f"{rng.uniform(0, 60):.2f}%" if v[1] else ""]
                if r["style"] == "normal" and rng.random() < 0.15:
                    r["label"] += f"（注{rng.randint(1, 9)}）"
            widths = [usable * 0.4] + [usable * 0.15] * 4
        else:
            header = [[("", 1 + note), ("Year ended 31 December", n)], [("", 1)] + [("Note", 1)] * note
                      + [(y, 1) for y in years]]
            rows = _statement_rows(rng, n, kind)
            for r in rows:
                if r["style"] == "normal":
                    r["values"] = [str(rng.randint(3, 24)) if rng.random() < 0.5 else ""] + r["values"]
                    r["numeric"] = [False] + [True] * n
                else:
                    r["values"] = [""] + r["values"]
            widths = [usable * 0.45, usable * 0.08] + [usable * 0.47 / n] * n
        _draw_table(draw, rng, m, y0, widths, header, rows, font, bold, page, row_h)
    elif kind == "swiss":
        sep = rng.choice(("'", THIN))
        header = [[("", 1), ("Geschäftsjahr", 2), ("", 1)], [("Position", 1), ("2024", 1), ("2023", 1), ("Δ %", 1)]]
        rows = []
        for lab in rng.sample(EN_LABELS, rng.randint(12, 20)):
            a, b = rng.randint(1000, 9_999_999), rng.randint(1000, 9_999_999)
            dec = rng.random() < 0.5
            tail = ".00" if dec else ""
            rows.append({"label": lab, "indent": rng.random() < 0.3, "style": "normal",
                         "values": [_group(a, sep) + tail, _group(b, sep) + tail, f"{100 * (a - b) / b:+.1f}%"]})
        _draw_table(draw, rng, m, y0, [usable * 0.4, usable * 0.22, usable * 0.22, usable * 0.16], header, rows,
                    font, bold, page, row_h)
    elif kind == "invoice":
        cur = rng.choice(("€", "£", "$"))
        header = [[("Description", 1), ("Qty", 1), ("Unit price", 1), ("VAT", 1), ("Amount", 1)]]
        rows = []
        total = 0.0
        for lab in rng.sample(ITEMS, rng.randint(5, 9)):
            q, u = rng.randint(1, 40), rng.randint(500, 250000) / 100
            total += q * u
            rows.append({"label": lab, "indent": 0, "style": "normal",
                         "values": [str(q), f"{cur}{u:,.2f}", rng.choice(("20%", "7.7%", "0%", "19%")),
                                    f"{cur}{q * u:,.2f}"]})
        y = _draw_table(draw, rng, m, y0, [usable * 0.4, usable * 0.1, usable * 0.18, usable * 0.12, usable * 0.2],
                        header, rows, font, bold, page, row_h)
        tot_rows = [{"label": lab, "indent": 0, "style": st, "values": [f"{cur}{v:,.2f}"]}
                    for lab, v, st in (("Subtotal", total, "subtotal"), ("VAT", total * 0.2, "normal"),
                                       ("Total due", total * 1.2, "total"))]
        _draw_table(draw, rng, m + usable * 0.5, y + row_h, [usable * 0.3, usable * 0.2], [[("", 1), ("", 1)]],
                    tot_rows, font, bold, page, row_h)
    else:  # twocol
        header = [[("Account", 1), ("Debit", 1), ("Credit", 1)]]
        rows = [{"label": f"{rng.randint(1000, 8999)} {rng.choice(EN_LABELS)[:18]}", "indent": 0, "style": "normal",
                 "values": [amount(rng, dec=True, parens=False, big=5), amount(rng, dec=True, big=5)]}
                for _ in range(rng.randint(40, 60))]
        gap = usable * 0.06
        cw = (usable - gap) / 2
        half = len(rows) // 2
        for i, part in enumerate((rows[:half], rows[half:])):
            _draw_table(draw, rng, m + i * (cw + gap), y0, [cw * 0.5, cw * 0.25, cw * 0.25], header, part, font,
                        bold, page, row_h)
    return _scan(page, rng)


def _scan(page: StatementPage, rng: random.Random) -> StatementPage:
    """Light scan noise and skew on about half the pages."""
    if rng.random() < 0.5:
        return page
    page.noisy = True
    page.skew = rng.uniform(-1.5, 1.5)
    img = page.image.rotate(page.skew, resample=Image.BICUBIC, expand=False, fillcolor="white")
    img = img.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 0.8)))
    arr = np.asarray(img).astype(np.float32)
    arr += np.random.default_rng(rng.randint(0, 2**31)).normal(0, rng.uniform(3, 9), arr.shape)
    img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=rng.randint(60, 85))
    page.image = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    return page
