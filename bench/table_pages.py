"""Seeded dense table pages with ground truth: the pages that lose numbers.

A page (US letter at 200 dpi, 1,700 x 2,200 px) holds a title and one table of 20-50 body rows: a label
column (English row names, or Chinese report items) and 3-14 narrow numeric columns (thousands
separators, negatives, parentheses, decimals, percentages), one or two header rows (two: a group header
whose cells span several columns, the label header spanning both rows). Styles, all seeded:

* rules: ``grid`` (every row and column), ``vertical`` (column rules only: narrow numeric columns
  between vertical rules), ``horizontal`` (row rules only), ``booktabs`` (top, header and bottom rules,
  thick and thin), ``none``;
* fills: column bands (pale colour behind every other numeric column), shaded (zebra) rows, both, none;
* print: 19-28 px body text (7-10 pt at 200 dpi), rows 1.35-1.8 text heights apart;
* optional skew (0-3 degrees either way) and scan noise (blur, gaussian noise, JPEG).

:func:`render_table_page` returns the image with the texts drawn: every body cell, the numbers
among them, the table as HTML (PubTabNet's form, for TEDS) and the page's lines (title, then each row
its cells joined by one space) for CER. Used by ``bench/tables.py`` and the table tests.
"""

from __future__ import annotations

import io
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

PAGE = (1700, 2200)
MARGIN = 110
RULES = ("grid", "vertical", "horizontal", "booktabs", "none")
FILLS = ("bands", "zebra", "both", "none")
LATIN_FONTS = (
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSansNarrow-Regular.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf",
)
ZH_FONTS = (
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc#2",
    "/usr/share/fonts/opentype/noto/NotoSerifCJK-Regular.ttc#2",
    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc#0", "/usr/share/fonts/truetype/arphic/uming.ttc#0",
)
EN_ITEMS = (
    "Total revenue", "Cost of sales", "Gross profit", "Operating expenses", "Net income", "Interest paid",
    "Depreciation", "Tax expense", "Cash at bank", "Inventories", "Trade receivables", "Payables", "Wages",
    "Alabama", "Alaska", "Arizona", "Colorado", "Delaware", "Florida", "Georgia", "Hawaii", "Idaho", "Iowa",
    "Kansas", "Maine", "Nevada", "Ohio", "Oregon", "Texas", "Utah", "Vermont", "Wyoming", "Retail",
    "Manufacturing", "Construction", "Mining", "Utilities", "Transport", "Finance", "Education", "Health care",
)
ZH_ITEMS = (
    "营业收入", "营业成本", "税金及附加", "销售费用", "管理费用", "研发费用", "财务费用", "利息收入", "其他收益",
    "投资收益", "信用减值损失", "资产减值损失", "营业利润", "营业外收入", "营业外支出", "利润总额", "所得税费用",
    "净利润", "货币资金", "应收账款", "预付款项", "存货", "固定资产", "在建工程", "无形资产", "商誉", "短期借款",
    "应付账款", "合同负债", "应交税费", "长期借款", "股本", "资本公积", "盈余公积", "未分配利润", "北京市",
    "上海市", "广东省", "江苏省", "浙江省", "山东省", "四川省", "湖北省", "河南省", "制造业", "批发和零售业",
)
EN_HEADS = ("Q1", "Q2", "Q3", "Q4", "Total", "Change", "Budget", "Actual", "Men", "Women", "Units", "Share")
ZH_HEADS = ("本期", "上期", "期末余额", "期初余额", "同比", "合计", "一季度", "二季度", "三季度", "四季度", "占比")
GROUPS_EN = ("2022", "2023", "2024", "2025", "Domestic", "Export")
GROUPS_ZH = ("2023年", "2024年", "2025年", "境内", "境外", "母公司")


@dataclass
class TablePage:
    """One rendered page: ``image`` RGB 1,700 x 2,200 px (larger when skewed), ``lang`` "en" / "zh",
    ``rules`` / ``fill`` its style, ``header`` rows of (text, colspan, rowspan), ``body`` rows of cell
    texts (first the label), ``numbers`` every numeric body cell in page order, ``html`` the table in
    PubTabNet's HTML form, ``lines`` the page's text lines (title, header rows, body rows);
    ``number_boxes`` the ink box of each of ``numbers`` on the page before any skew (pixels).
    """

    image: Image.Image
    lang: str
    rules: str
    fill: str
    header: list[list[tuple[str, int, int]]]
    body: list[list[str]]
    numbers: list[str] = field(default_factory=list)
    number_boxes: list[tuple[float, float, float, float]] = field(default_factory=list)
    html: str = ""
    lines: list[str] = field(default_factory=list)


def _font(spec: str, size: int) -> ImageFont.FreeTypeFont:
    path, _, index = spec.partition("#")
    return ImageFont.truetype(path, size, index=int(index or 0))


def number_text(rng: random.Random) -> str:
    """A numeric cell as statistics and financial tables print them (digits, ``,``, ``.``, ``-``,
    ``%``, parentheses)."""
    kind = rng.random()
    if kind < 0.35:
        return f"{rng.randint(1000, 99999):,}"
    if kind < 0.5:
        return str(rng.randint(0, 999))
    if kind < 0.62:
        return f"-{rng.randint(100, 9999):,}"
    if kind < 0.7:
        return f"({rng.randint(100, 99999):,})"
    if kind < 0.82:
        return f"{rng.uniform(-120, 120):.2f}%"
    if kind < 0.92:
        return f"{rng.uniform(0, 9999):,.2f}"
    return f"{rng.uniform(-0.2, 0.2):.4f}"


def _header(rng: random.Random, lang: str, n_num: int) -> list[list[tuple[str, int, int]]]:
    """One header row, or two with group cells spanning 2-4 numeric columns (the label spans both)."""
    heads, groups = (EN_HEADS, GROUPS_EN) if lang == "en" else (ZH_HEADS, GROUPS_ZH)
    label = "Item" if lang == "en" else "项目"
    if n_num < 4 or rng.random() < 0.5:
        return [[(label, 1, 1)] + [(rng.choice(heads), 1, 1) for _ in range(n_num)]]
    top: list[tuple[str, int, int]] = [(label, 1, 2)]
    left, names = n_num, list(groups)
    rng.shuffle(names)
    while left:
        span = min(left, rng.randint(2, 4))
        top.append((names[len(top) % len(names)], span, 1))
        left -= span
    return [top, [(rng.choice(heads), 1, 1) for _ in range(n_num)]]


def _html(header: list[list[tuple[str, int, int]]], body: list[list[str]]) -> str:
    """The table as PubTabNet writes it (``<thead>`` / ``<tbody>``, ``td`` cells with their spans)."""
    def td(text: str, cs: int = 1, rs: int = 1) -> str:
        attrs = (f' colspan="{cs}"' if cs > 1 else "") + (f' rowspan="{rs}"' if rs > 1 else "")
        return f"<td{attrs}>{text}</td>"
    head = "".join("<tr>" + "".join(td(*c) for c in row) + "</tr>" for row in header)
    rows = "".join("<tr>" + "".join(td(c) for c in row) + "</tr>" for row in body)
    return f"<html><body><table><thead>{head}</thead><tbody>{rows}</tbody></table></body></html>"


def render_table_page(seed: int, lang: str | None = None, skew_deg: float | None = None,
                      noise: bool | None = None, rules: str | None = None, fill: str | None = None,
                      numbers: Callable[[random.Random], str] | None = None) -> TablePage:
    """Page number ``seed``; ``lang``, ``rules``, ``fill``, ``skew_deg`` (degrees counter-clockwise)
    and ``noise`` are seeded when None (skew: 0 on half the pages, else uniform in [-3, 3]);
    ``numbers`` writes each numeric cell from the page's generator (default :func:`number_text`).
    """
    rng = random.Random(seed)
    lang = lang or rng.choice(("en", "zh"))
    rules = rules or rng.choice(RULES)
    fill = fill or rng.choice(FILLS)
    size = rng.randint(19, 28)
    latin = _font(rng.choice(LATIN_FONTS), size)
    label_font = latin if lang == "en" else _font(rng.choice(ZH_FONTS), size)
    pitch = int(size * rng.uniform(1.35, 1.8))
    pad = rng.randint(6, 14)  # paper between a cell's text and its column's edge
    n_rows = min(rng.randint(20, 50), (PAGE[1] - 2 * MARGIN - 3 * pitch - 120) // pitch)
    items = EN_ITEMS if lang == "en" else ZH_ITEMS
    labels = [rng.choice(items) for _ in range(n_rows)]
    label_w = max(label_font.getlength(t) for t in labels) + 2 * pad
    num_w = latin.getlength("(99,999.99)") + 2 * pad
    n_num = max(3, min(rng.randint(3, 14), int((PAGE[0] - 2 * MARGIN - label_w) // num_w)))
    body = [[labels[r], *((numbers or number_text)(rng) for _ in range(n_num))] for r in range(n_rows)]
    header = _header(rng, lang, n_num)
    widths = [label_w] + [max(num_w * rng.uniform(0.8, 1.0), *(latin.getlength(b[c]) + 2 * pad for b in body))
                          for c in range(1, n_num + 1)]
    xs = [float(MARGIN)]
    for w in widths:
        xs.append(xs[-1] + w)
    img = Image.new("RGB", PAGE, (255, 255, 255))
    draw = ImageDraw.Draw(img)
    title = (f"Table {rng.randint(1, 40)}. Summary by item, {rng.choice(GROUPS_EN[:4])}" if lang == "en"
             else f"表{rng.randint(1, 40)} 主要财务数据（单位：万元）")
    draw.text((MARGIN, MARGIN), title, font=label_font, fill=(0, 0, 0))
    top = MARGIN + 2 * pitch
    y_rows = [top + i * pitch for i in range(len(header) + n_rows + 1)]
    band = rng.choice(((214, 232, 250), (252, 236, 200), (220, 242, 222), (235, 235, 235)))
    if fill in ("bands", "both"):
        for c in range(1, n_num + 1, 2):
            draw.rectangle((xs[c], top, xs[c + 1], y_rows[-1]), fill=band)
    if fill in ("zebra", "both"):
        shade = tuple(max(0, v - 22) for v in band) if fill == "both" else (232, 232, 232)
        for r in range(len(header), len(header) + n_rows, 2):
            draw.rectangle((xs[0], y_rows[r], xs[-1], y_rows[r + 1]), fill=shade)
    ink = (0, 0, 0) if rng.random() < 0.7 else (40, 40, 60)
    _draw_rules(draw, rules, xs, y_rows, header, rng.choice((1, 2)))
    font_for = [label_font] + [latin] * n_num
    for r, row in enumerate(header):  # header cells centred over their spans
        c = 0 if r == 0 else 1
        for text, cs, rs in row:
            f = label_font if lang == "zh" or c == 0 else latin
            x = (xs[c] + xs[c + cs]) / 2 - f.getlength(text) / 2
            y = (y_rows[r] + y_rows[r + rs]) / 2 - size * 0.6
            draw.text((x, y), text, font=f, fill=ink)
            c += cs
    boxes: list[tuple[float, ...]] = []
    for r, row in enumerate(body):
        y = y_rows[len(header) + r] + (pitch - size) / 2 - size * 0.1
        for c, text in enumerate(row):
            f = font_for[c]
            x = xs[c] + pad if c == 0 else xs[c + 1] - pad - f.getlength(text)
            draw.text((x, y), text, font=f, fill=ink)
            if c:
                boxes.append(tuple(float(v) for v in draw.textbbox((x, y), text, font=f)))
    page = TablePage(img, lang, rules, fill, header, body, number_boxes=boxes)
    page.numbers = [t for row in body for t in row[1:]]
    page.html = _html(header, body)
    page.lines = [title, *(" ".join(t for t, _, _ in row) for row in header), *(" ".join(row) for row in body)]
    angle = (0.0 if rng.random() < 0.5 else rng.uniform(-3.0, 3.0)) if skew_deg is None else skew_deg
    if angle:
        img = img.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=(255, 255, 255))
    if rng.random() < 0.4 if noise is None else noise:
        img = _scanned(img, rng)
    page.image = img
    return page


def _header_grid(header: list[list[tuple[str, int, int]]]) -> list[list[int]]:
    """The cell (its order in ``header``, row by row) over each column of each header row, spans
    spread out: [rows][columns] ints, so a cell spanning 2 columns or rows has its number in each."""
    n = sum(cs for _, cs, _ in header[0])
    grid = [[-1] * n for _ in header]
    k = 0
    for r, row in enumerate(header):
        c = 0
        for _, cs, rs in row:
            while grid[r][c] != -1:  # a cell of a row above spans down into this one
                c += 1
            for rr in range(r, r + rs):
                grid[rr][c: c + cs] = [k] * cs
            c, k = c + cs, k + 1
    return grid


def _draw_rules(draw: ImageDraw.ImageDraw, rules: str, xs: list[float], ys: list[int],
                header: list[list[tuple[str, int, int]]], width: int) -> None:
    """The table's rules of style ``rules`` on column edges ``xs`` and row edges ``ys`` (pixels); in the
    ``header`` rows only on the edges of its cells: no rule runs through a cell spanning two columns or
    two rows (its centred text lies on the inner edge, and a printed table never rules through it).
    """
    dark = (0, 0, 0)
    n_head = len(header)
    grid = _header_grid(header)
    if rules in ("grid", "vertical"):
        for k, x in enumerate(xs):
            draw.line((x, ys[n_head], x, ys[-1]), fill=dark, width=width)
            for r in range(n_head):  # a header row: only between two of its cells
                if k in (0, len(xs) - 1) or grid[r][k - 1] != grid[r][k]:
                    draw.line((x, ys[r], x, ys[r + 1]), fill=dark, width=width)
    if rules in ("grid", "horizontal"):
        for r, y in enumerate(ys):
            if 0 < r < n_head:  # between two header rows: not under a cell spanning both
                for c in range(len(xs) - 1):
                    if grid[r - 1][c] != grid[r][c]:
                        draw.line((xs[c], y, xs[c + 1], y), fill=dark, width=width)
            else:
                draw.line((xs[0], y, xs[-1], y), fill=dark, width=width)
    if rules in ("vertical", "booktabs"):
        for y, w in ((ys[0], width + 1), (ys[n_head], width), (ys[-1], width + 1)):
            draw.line((xs[0], y, xs[-1], y), fill=dark, width=w)


def _scanned(img: Image.Image, rng: random.Random) -> Image.Image:
    """``img`` as a mediocre scan: slight blur, gaussian noise (sigma 4-10 gray levels), JPEG q 55-85."""
    img = img.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 0.8)))
    a = np.asarray(img, dtype=np.float32)
    a = a + np.random.default_rng(rng.randrange(1 << 30)).normal(0, rng.uniform(4, 10), a.shape[:2])[..., None]
    img = Image.fromarray(a.clip(0, 255).astype(np.uint8))
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=rng.randint(55, 85))
    return Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
