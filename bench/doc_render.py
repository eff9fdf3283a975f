"""Seeded document pages with known reading order, for ``bench/doc_pages.py``: key-value forms,
invoices with side-by-side panels, and reports (a table with a caption above and a note under it,
prose around it), each in English or Chinese; rendered with fonts Debian ships (fonts-dejavu,
fonts-liberation; the held-out CJK faces of :func:`training.compact.render.find_zh_fonts`).

Reading order of the ground truth (one text line per list item):

* a key-value row (a label and its value on one baseline, however far apart) is one line, label first;
* side-by-side panels (bill-to / ship-to, seller / invoice details, two key-value panels of a form)
  are read panel by panel, left panel first, each top to bottom;
* a table is read where it stands, a row per line (cells joined by a space), after its caption and
  before the note under it;
* running headers first, page footers (page number) last.
"""

from __future__ import annotations

import pathlib
import random
from dataclasses import dataclass, field

from PIL import Image, ImageDraw, ImageFont

PAGE = (1700, 2200)  # US letter at 200 dpi
MARGIN = 130
LATIN_DIRS = ("/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/truetype/liberation")
LATIN_FONTS = ("DejaVuSans.ttf", "DejaVuSerif.ttf", "LiberationSans-Regular.ttf", "LiberationSerif-Regular.ttf")
LATIN_BOLD = ("DejaVuSans-Bold.ttf", "LiberationSans-Bold.ttf", "LiberationSerif-Bold.ttf")
KINDS = ("form", "invoice", "report")

EN_LABELS = ["Name", "Full name", "Date of birth", "Address", "City", "Postal code", "Phone", "Email",
             "Account number", "Reference", "Employer", "Position", "Start date", "Signature date",
             "Policy number", "Vehicle", "Amount claimed", "Country", "Tax ID", "Department"]
ZH_LABELS = ["姓名", "性别", "出生日期", "身份证号码", "联系电话", "电子邮箱", "家庭住址", "工作单位", "职务",
             "邮政编码", "开户银行", "银行账号", "申请日期", "申请金额", "备注", "所属部门", "入职日期", "学历"]
EN_NAMES = ["Maria Lopez", "John Carter", "Wei Zhang", "Anna Schmidt", "Omar Haddad", "Lena Novak"]
EN_STREETS = ["Harbour Road", "Elm Street", "Station Avenue", "Mill Lane", "Park Terrace", "King Street"]
EN_CITIES = ["Springfield", "Riverton", "Lakeside", "Northbridge", "Westfield", "Ashford"]
EN_ITEMS = ["Consulting services", "Printer paper A4", "Office chair", "Software licence", "Shipping",
            "Network cable 5 m", "Toner cartridge", "Training session", "Desk lamp", "Maintenance"]
ZH_ITEMS = ["技术服务费", "办公用品", "打印纸", "软件许可", "运输费", "网络设备", "维修服务", "培训费", "咨询费"]
ZH_NAMES = ["张伟", "王芳", "李娜", "刘洋", "陈静", "杨磊", "赵敏"]
ZH_PLACES = ["北京市海淀区中关村大街", "上海市浦东新区世纪大道", "广州市天河区体育西路", "杭州市西湖区文三路"]


@dataclass
class Doc:
    """A rendered page and its ground-truth lines in reading order."""

    image: Image.Image
    lines: list[str]
    kind: str
    script: str


@dataclass
class Fonts:
    """The page's faces: body, bold (headings, labels), title (large bold)."""

    body: ImageFont.FreeTypeFont
    bold: ImageFont.FreeTypeFont
    title: ImageFont.FreeTypeFont


def _truetype(spec: str, size: int) -> ImageFont.FreeTypeFont:
    path, _, index = spec.partition("#")
    return ImageFont.truetype(path, size, index=int(index or 0))


def pick_fonts(rng: random.Random, script: str, zh_fonts: list[str], size: int) -> Fonts:
    """Faces for ``script`` ("en" or "zh") at ``size`` px body. Raises FileNotFoundError when missing."""
    if script == "zh":
        if not zh_fonts:
            raise FileNotFoundError("no held-out CJK fonts (apt-get install fonts-noto-cjk fonts-wqy-microhei)")
        return Fonts(*(_truetype(rng.choice(zh_fonts), s) for s in (size, size, int(size * 1.6))))
    def find(names: tuple[str, ...]) -> str:
        paths = [str(pathlib.Path(d) / n) for n in names for d in LATIN_DIRS if (pathlib.Path(d) / n).is_file()]
        if not paths:
            raise FileNotFoundError(f"none of {names} under {LATIN_DIRS} (apt-get install fonts-dejavu)")
        return rng.choice(paths)
    body, bold = find(LATIN_FONTS), find(LATIN_BOLD)
    return Fonts(_truetype(body, size), _truetype(bold, size), _truetype(bold, int(size * 1.6)))


@dataclass
class Sheet:
    """A page being typeset: the image, the pen's height ``y`` (pixels) and the truth lines."""

    rng: random.Random
    fonts: Fonts
    y: float = MARGIN
    truth: list[str] = field(default_factory=list)
    footer: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.img = Image.new("L", PAGE, 255)
        self.draw = ImageDraw.Draw(self.img)

    @property
    def pitch(self) -> float:
        """Line pitch of the body text (pixels)."""
        return self.fonts.body.size * 1.75

    def text(self, x: float, y: float, s: str, font: ImageFont.FreeTypeFont | None = None) -> None:
        """Draw ``s`` at (x, y) without recording it (the caller records the truth)."""
        self.draw.text((x, y), s, font=font or self.fonts.body, fill=self.rng.randint(0, 50))

    def line(self, s: str, x: float = MARGIN, font: ImageFont.FreeTypeFont | None = None,
             pitch: float | None = None) -> None:
        """Draw ``s`` at the pen, record it, move down one pitch."""
        self.text(x, self.y, s, font)
        self.truth.append(s)
        self.y += pitch or self.pitch

    def right(self, s: str, y: float, font: ImageFont.FreeTypeFont | None = None) -> None:
        """Draw ``s`` right-aligned at the right margin at height ``y`` (not recorded)."""
        f = font or self.fonts.body
        self.text(PAGE[0] - MARGIN - f.getlength(s), y, s, f)

    def kv_rows(self, pairs: list[tuple[str, str]], x: float, tab: float) -> list[str]:
        """Key-value rows from the pen down: labels at ``x``, values at ``x + tab``; returns their truth
        (label and value joined by a space) without recording it; the pen moves below them.
        """
        out = []
        for label, value in pairs:
            self.text(x, self.y, label, self.fonts.bold)
            self.text(x + tab, self.y, value)
            out.append(f"{label} {value}")
            self.y += self.pitch
        return out

    def table(self, rows: list[list[str]], x0: float, x1: float, ruled: bool) -> None:
        """A table from the pen down: first column left-aligned, the others right-aligned in equal
        columns up to ``x1``; rows recorded as their cells joined by a space; grid rules if ``ruled``.
        """
        n = len(rows[0])
        first_w = max(self.fonts.body.getlength(r[0]) for r in rows) + self.fonts.body.size * 2
        col_w = (x1 - x0 - first_w) / max(1, n - 1)
        top = self.y - self.pitch * 0.2
        for i, row in enumerate(rows):
            font = self.fonts.bold if i == 0 else self.fonts.body
            self.text(x0 + 8, self.y, row[0], font)
            for j, cell in enumerate(row[1:], start=1):
                self.text(x0 + first_w + j * col_w - font.getlength(cell) - 10, self.y, cell, font)
            self.truth.append(" ".join(row))
            self.y += self.pitch * 1.15
        bottom = self.y - self.pitch * 0.2
        if ruled:
            ys = [top + k * self.pitch * 1.15 for k in range(len(rows) + 1)]
            for yy in ys:
                self.draw.line((x0, yy, x1, yy), fill=0, width=2)
            for xx in [x0, x0 + first_w, *(x0 + first_w + j * col_w for j in range(1, n))]:
                self.draw.line((xx, top, xx, bottom), fill=0, width=2)
        else:
            self.draw.line((x0, top, x1, top), fill=0, width=3)
            self.draw.line((x0, bottom, x1, bottom), fill=0, width=3)
        self.y += self.pitch * 0.6

    def page_image(self, skew_deg: float) -> Image.Image:
        """The page rotated by ``skew_deg`` degrees (white corners), RGB."""
        img = self.img.rotate(skew_deg, resample=Image.Resampling.BICUBIC, expand=False, fillcolor=255)
        return img.convert("RGB")


def amount(rng: random.Random, big: bool = False) -> str:
    """A money amount with thousands separators and two decimals."""
    return f"{rng.randint(1, 10 ** (rng.randint(5, 7) if big else rng.randint(2, 4))) / 100:,.2f}"


def date(rng: random.Random, script: str) -> str:
    """A date in the script's usual form."""
    y, m, d = rng.randint(2015, 2026), rng.randint(1, 12), rng.randint(1, 28)
    return f"{y}年{m}月{d}日" if script == "zh" else rng.choice([f"{y}-{m:02d}-{d:02d}", f"{d:02d}/{m:02d}/{y}"])
