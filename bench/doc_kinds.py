"""The three page kinds of ``bench/doc_pages.py`` (see :mod:`bench.doc_render` for the reading order
of their ground truth): :func:`form`, :func:`invoice`, :func:`report`; each seeded, in English or
Chinese, with several layouts per kind.
"""

from __future__ import annotations

import random

from bench.doc_render import (
    EN_CITIES,
    EN_ITEMS,
    EN_LABELS,
    EN_NAMES,
    EN_STREETS,
    MARGIN,
    PAGE,
    ZH_ITEMS,
    ZH_LABELS,
    ZH_NAMES,
    ZH_PLACES,
    Sheet,
    amount,
    date,
)


def _value(rng: random.Random, label: str, script: str) -> str:
    """A plausible value for a form field."""
    if script == "zh":
        if "日期" in label:
            return date(rng, "zh")
        if "金额" in label:
            return f"¥{amount(rng, True)}"
        if any(k in label for k in ("电话", "号码", "账号", "编码")):
            return "".join(str(rng.randint(0, 9)) for _ in range(rng.choice([6, 11, 18])))
        if any(k in label for k in ("住址", "单位", "银行")):
            return rng.choice(ZH_PLACES) + f"{rng.randint(1, 300)}号"
        return rng.choice(ZH_NAMES)
    if "date" in label.lower():
        return date(rng, "en")
    if "Amount" in label:
        return f"${amount(rng, True)}"
    if any(k in label for k in ("number", "Phone", "ID", "code", "Reference")):
        return f"{rng.randint(100, 999)}-{rng.randint(1000, 99999)}"
    if "Address" in label:
        return f"{rng.randint(1, 250)} {rng.choice(EN_STREETS)}"
    if label in ("City", "Country", "Employer", "Department"):
        return rng.choice(EN_CITIES)
    return rng.choice(EN_NAMES)


def _colon(label: str, script: str) -> str:
    return label + ("：" if script == "zh" else ":")


def _pairs(rng: random.Random, script: str, n: int) -> list[tuple[str, str]]:
    labels = rng.sample(ZH_LABELS if script == "zh" else EN_LABELS, n)
    return [(_colon(lb, script), _value(rng, lb, script)) for lb in labels]


def _tab(sheet: Sheet, pairs: list[tuple[str, str]]) -> float:
    """Where values start: after the longest label plus 1-3 em."""
    return max(sheet.fonts.bold.getlength(lb) for lb, _ in pairs) + sheet.fonts.body.size * sheet.rng.uniform(1, 3)


def _header(sheet: Sheet, script: str, left: str, right: str) -> None:
    """A running header: ``left`` at the left margin, ``right`` right-aligned, read left then right."""
    small = sheet.fonts.body
    sheet.text(MARGIN, 60, left, small)
    sheet.right(right, 60, small)
    sheet.truth += [left, right]


def _panels(sheet: Sheet, left: list[str], right: list[str], x_right: float) -> None:
    """Two side-by-side panels from the pen down (pre-drawn lines, each list's first line bold);
    recorded panel by panel."""
    y0 = sheet.y
    for lines, x in ((left, MARGIN), (right, x_right)):
        sheet.y = y0
        for i, s in enumerate(lines):
            sheet.text(x, sheet.y, s, sheet.fonts.bold if i == 0 else None)
            sheet.y += sheet.pitch
    sheet.truth += left + right
    sheet.y = y0 + sheet.pitch * (max(len(left), len(right)) + 0.8)


def form(sheet: Sheet, script: str) -> None:
    """An application form: title, then 2-3 sections; a section is one key-value panel or two side by
    side (left one read first), under a bold heading; a declaration line and a signature row last.
    """
    rng = sheet.rng
    zh = script == "zh"
    if rng.random() < 0.5:
        _header(sheet, script, "申请表" if zh else "Application form", f"No. {rng.randint(1000, 9999)}")
        sheet.y = MARGIN + 40
    sheet.line(rng.choice(["入职登记表", "报销申请表", "会员信息登记表"] if zh else
                          ["Registration Form", "Claim Application", "Employee Details"]), font=sheet.fonts.title,
               pitch=sheet.fonts.title.size * 2)
    for s in range(rng.randint(2, 3)):
        heading = (["一、基本信息", "二、联系方式", "三、其他信息"] if zh else
                   ["1. Personal details", "2. Contact", "3. Other information"])[s]
        sheet.line(heading, font=sheet.fonts.bold, pitch=sheet.pitch * 1.3)
        if rng.random() < 0.5:  # two key-value panels side by side
            left, right = _pairs(rng, script, rng.randint(2, 4)), _pairs(rng, script, rng.randint(2, 4))
            y0, half = sheet.y, (PAGE[0] - 2 * MARGIN) / 2
            tl, tr = _tab(sheet, left), _tab(sheet, right)
            gutter = sheet.fonts.body.size * 5  # the panels apart, as a form's halves are
            while tl + max(sheet.fonts.body.getlength(v) for _, v in left) > half - gutter:
                left = [(lb, v[: max(2, len(v) - 3)]) for lb, v in left]
            truth = sheet.kv_rows(left, MARGIN, tl)
            sheet.y = y0
            truth += sheet.kv_rows(right, MARGIN + half + rng.randint(0, 60), tr)
            sheet.truth += truth
            sheet.y = y0 + sheet.pitch * (max(len(left), len(right)))
        else:
            pairs = _pairs(rng, script, rng.randint(3, 6))
            sheet.truth += sheet.kv_rows(pairs, MARGIN + rng.choice([0, 20]), _tab(sheet, pairs))
        sheet.y += sheet.pitch * 0.7
    sheet.line("本人承诺以上信息真实有效。" if zh else "I declare that the information given above is true.")
    sig = ("签名：", "日期：") if zh else ("Signature:", "Date:")
    sheet.text(MARGIN, sheet.y, sig[0], sheet.fonts.bold)
    sheet.text(PAGE[0] / 2, sheet.y, sig[1], sheet.fonts.bold)
    d = date(rng, script)
    sheet.text(PAGE[0] / 2 + sheet.fonts.bold.getlength(sig[1]) + 30, sheet.y, d)
    sheet.truth += [sig[0], f"{sig[1]} {d}"]


def invoice(sheet: Sheet, script: str) -> None:
    """An invoice: seller panel beside the invoice details (key-value), bill-to beside ship-to, the
    items table (ruled or not), the totals (key-value, right), a note under the table, a footer.
    """
    rng = sheet.rng
    zh = script == "zh"
    seller = rng.choice(["华信科技有限公司", "东方贸易有限公司"] if zh else
                        ["Northwind Supplies Ltd", "Acme Office Co"])
    street = rng.choice(ZH_PLACES) + f"{rng.randint(1, 99)}号" if zh else \
        f"{rng.randint(1, 250)} {rng.choice(EN_STREETS)}, {rng.choice(EN_CITIES)}"
    sheet.line("增值税普通发票" if zh else "INVOICE", font=sheet.fonts.title, pitch=sheet.fonts.title.size * 1.8)
    meta = [("发票号码：" if zh else "Invoice No:", f"{rng.randint(10000000, 99999999)}"),
            ("开票日期：" if zh else "Date:", date(rng, script)),
            ("付款期限：" if zh else "Due date:", date(rng, script))]
    x_right = PAGE[0] * rng.uniform(0.55, 0.62)
    left = [seller, street, ("电话：" if zh else "Tel: ") + f"{rng.randint(100, 999)}-{rng.randint(1000, 9999)}"]
    right = [f"{lb} {v}" if zh else f"{lb} {v}" for lb, v in meta]
    _panels(sheet, left, right, x_right)
    to = [("购买方：" if zh else "Bill to:"), rng.choice(ZH_NAMES if zh else EN_NAMES),
          rng.choice(ZH_PLACES) if zh else f"{rng.randint(1, 250)} {rng.choice(EN_STREETS)}"]
    ship = [("收货方：" if zh else "Ship to:"), rng.choice(ZH_NAMES if zh else EN_NAMES),
            rng.choice(ZH_PLACES) if zh else f"{rng.randint(1, 250)} {rng.choice(EN_STREETS)}"]
    if not zh and rng.random() < 0.5:
        to.append(rng.choice(EN_CITIES))
    _panels(sheet, to, ship, x_right if rng.random() < 0.5 else PAGE[0] / 2)
    head = ["项目", "数量", "单价", "金额"] if zh else ["Description", "Qty", "Unit price", "Amount"]
    rows = [head]
    for _ in range(rng.randint(3, 7)):
        q = rng.randint(1, 20)
        rows.append([rng.choice(ZH_ITEMS if zh else EN_ITEMS), str(q), amount(rng), amount(rng, True)])
    sheet.table(rows, MARGIN, PAGE[0] - MARGIN, ruled=rng.random() < 0.5)
    totals = [("小计：" if zh else "Subtotal:", amount(rng, True)), ("税额：" if zh else "Tax:", amount(rng)),
              ("合计：" if zh else "Total:", amount(rng, True))]
    x = PAGE[0] * 0.62
    for lb, v in totals:
        sheet.text(x, sheet.y, lb, sheet.fonts.bold)
        sheet.right(v, sheet.y)
        sheet.truth.append(f"{lb} {v}")
        sheet.y += sheet.pitch
    sheet.y += sheet.pitch * 0.5
    sheet.line("备注：请于三十日内付款，谢谢合作。" if zh else "Note: payment is due within 30 days. Thank you.")
    foot = ("第1页 共1页" if zh else "Page 1 of 1")
    sheet.text((PAGE[0] - sheet.fonts.body.getlength(foot)) / 2, PAGE[1] - 110, foot)
    sheet.footer.append(foot)


def _prose(sheet: Sheet, source: list[str], script: str, n_lines: int) -> None:
    """``n_lines`` lines of body text wrapped at the page width (hanzi: between any two characters)."""
    width = PAGE[0] - 2 * MARGIN
    font = sheet.fonts.body
    buf = ""
    while n_lines > 0:
        if not buf:
            buf = "".join(sheet.rng.choice(source) for _ in range(3))
            buf = "".join(c for c in buf if not c.isspace()) if script == "zh" else " ".join(buf.split())
        cut = len(buf)
        while font.getlength(buf[:cut]) > width:
            cut -= 1
        if script != "zh" and cut < len(buf) and " " in buf[:cut]:
            cut = buf[:cut].rindex(" ")
        if buf[:cut].strip():
            sheet.line(buf[:cut].strip())
            n_lines -= 1
        buf = buf[cut:].strip()


def report(sheet: Sheet, script: str, source: list[str]) -> None:
    """A report page: running header, section heading, prose, a table caption, the table (label
    column and 2-4 amount columns), a note under it, more prose, a centred page number.
    """
    rng = sheet.rng
    zh = script == "zh"
    year = rng.randint(2015, 2025)
    _header(sheet, script, rng.choice(["华信科技股份有限公司", "东方能源集团"]) if zh else "Northwind Holdings plc",
            f"{year}年年度报告" if zh else f"Annual Report {year}")
    sheet.y = MARGIN + 40
    sheet.line(rng.choice(["第三节 管理层讨论与分析", "第五节 财务报告"] if zh else
                          ["Management discussion", "Financial review"]), font=sheet.fonts.title,
               pitch=sheet.fonts.title.size * 1.8)
    _prose(sheet, source, script, rng.randint(3, 6))
    sheet.y += sheet.pitch * 0.4
    n_cols = rng.randint(2, 4)
    number = rng.randint(1, 9)
    cap = f"表{number} 主要会计数据（单位：元）" if zh else f"Table {number}: Key figures (in thousands)"
    sheet.line(cap, font=sheet.fonts.bold)
    head = [("项目" if zh else "Item")] + [f"{year - k}" + ("年" if zh else "") for k in range(n_cols)]
    labels = ["营业收入", "营业成本", "净利润", "总资产", "归属于股东的净资产", "经营活动现金流量净额",
              "基本每股收益"] if zh else ["Revenue", "Cost of sales", "Net profit", "Total assets", "Equity",
                                         "Operating cash flow", "Dividends"]
    rows = [head] + [[lb] + [amount(rng, True) for _ in range(n_cols)] for lb in rng.sample(labels, rng.randint(3, 7))]
    sheet.table(rows, MARGIN, PAGE[0] - MARGIN, ruled=rng.random() < 0.5)
    sheet.line("注：上表数据未经审计。" if zh else "Note: figures above are unaudited.")
    sheet.y += sheet.pitch * 0.4
    _prose(sheet, source, script, rng.randint(2, 5))
    folio = str(rng.randint(2, 200))
    sheet.text((PAGE[0] - sheet.fonts.body.getlength(folio)) / 2, PAGE[1] - 110, folio)
    sheet.footer.append(folio)
