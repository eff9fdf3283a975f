"""Seeded receipts and filled-in forms, printed and scanned: images with their ground-truth lines.

:func:`make_document` ``(seed)`` draws one document at :data:`training.compact.scan_degrade.RENDER_DPI`
and degrades it (:mod:`training.compact.scan_degrade`); the kind cycles with the seed
(:data:`KINDS`), so any run of consecutive seeds covers every kind:

* ``receipt_thermal`` / ``receipt_dotmatrix``: an 80 mm till receipt in a monospace or condensed
  receipt face (:data:`RECEIPT_FACES`), 7-10 pt: shop name, address, date, items with quantity x
  price and a right-aligned amount, subtotal, tax, total, cash, change; thermal print or dot matrix,
  scanned at 150-200 dpi (sometimes JPEG);
* ``receipt_zh``: the same receipt with Chinese item names and headings (:data:`ZH_FACES`);
* ``form_scan``: a letter-size form: a title, labelled fields whose typed value sits on an underline,
  boxed fields, typed in one of :data:`FORM_FACES` (URW Gothic included), scanned at 150-200 dpi with
  JPEG artefacts;
* ``form_photo``: the same form photographed (:func:`training.compact.scan_degrade.photo_warp`);
* ``form_fax``: the same form faxed at standard resolution (:func:`training.compact.scan_degrade.fax`).

Ground truth: one string per printed row in reading order (a row's left text, then its right
text, joined by a space), and each separately printed piece of text (a row's left or right part, a
form's label or value) with its box in the pixels of the returned image (the confidence calibration
matches the model's lines to them). Texts come from small built-in word lists, so the module needs
no corpus.
"""

from __future__ import annotations

import glob
import random
from dataclasses import dataclass
from functools import cache, lru_cache

from PIL import Image, ImageDraw, ImageFont

from training.compact import scan_degrade as deg

KINDS = ("receipt_thermal", "form_scan", "receipt_dotmatrix", "receipt_zh", "form_photo", "form_fax")
#: Receipt faces (file-name globs under /usr/share/fonts): monospace and condensed faces of Debian.
RECEIPT_FACES = ("DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf", "FreeMono.ttf", "FreeMonoBold.ttf",
                 "LiberationMono-Regular.ttf", "NimbusMonoPS-Regular.otf", "NimbusMonoPS-Bold.otf",
                 "texgyrecursor-regular.otf", "NotoSansMono-Regular.ttf", "DejaVuSansCondensed.ttf",
                 "LiberationSansNarrow-Regular.ttf", "NimbusSansNarrow-Regular.otf")
#: Typewriter / office faces a form is typed in.
FORM_FACES = ("URWGothic-Book.otf", "URWGothic-Demi.otf", "LiberationSans-Regular.ttf", "DejaVuSerif.ttf",
              "Carlito-Regular.ttf", "NimbusRoman-Regular.otf", "texgyrecursor-regular.otf", "FreeSans.ttf",
              "NimbusSans-Regular.otf", "texgyreadventor-regular.otf", "LiberationSerif-Regular.ttf")
ZH_FACES = ("wqy-zenhei.ttc", "wqy-microhei.ttc", "NotoSansCJK-Regular.ttc", "uming.ttc")

_ITEMS = ("MILK", "BREAD", "EGGS", "BUTTER", "APPLES", "BANANAS", "COFFEE", "TEA", "RICE", "PASTA", "SUGAR",
          "FLOUR", "CHEESE", "YOGURT", "CHICKEN", "BEEF", "SALMON", "TOMATOES", "ONIONS", "POTATOES", "SOAP",
          "SHAMPOO", "TISSUES", "BATTERIES", "WATER", "JUICE", "COLA", "CHOCOLATE", "COOKIES", "OLIVE OIL",
          "VINEGAR", "PEPPER", "SALT", "HONEY", "JAM", "CEREAL", "OATS", "LETTUCE", "CARROTS", "GARLIC")
_ADJ = ("ORG", "LRG", "SML", "2%", "WHOLE", "FRESH", "FRZ", "LOW FAT", "PKG", "DIET", "GF", "XL", "6PK")
_ZH_ITEMS = ("牛奶", "面包", "鸡蛋", "黄油", "苹果", "香蕉", "咖啡", "绿茶", "大米", "面条", "白糖", "酸奶",
             "鸡肉", "牛肉", "西红柿", "土豆", "洗发水", "纸巾", "电池", "矿泉水", "果汁", "巧克力", "饼干",
             "花生油", "酱油", "食盐", "蜂蜜", "燕麦", "生菜", "胡萝卜", "大蒜", "香皂")
_STREETS = ("Main St", "Oak Avenue", "High Street", "Market Rd", "Elm Street", "Station Road", "Park Lane")
_TOWNS = ("Springfield", "Riverton", "Ashford", "Lakeside", "Fairview", "Kingston", "Milton")
_FIRST = ("John", "Maria", "Ahmed", "Yuki", "Olga", "Pierre", "Grace", "Lukas", "Chen", "Fatima", "Quentin")
_LAST = ("Smith", "Garcia", "Okafor", "Tanaka", "Ivanova", "Dubois", "Kowalski", "Johnson", "Wu", "Novak")
_LABELS = ("Name", "Date of birth", "Address", "City", "Postcode", "Telephone", "Email", "Account no.",
           "Policy number", "Amount", "Date", "Reference", "Employer", "Signature date", "Invoice no.")


@dataclass
class ScanDocument:
    """One generated document: ``image`` (RGB), its ``truth`` rows in reading order, its ``kind``
    (one of :data:`KINDS`), the ``dpi`` it was scanned at (0 for a photo) and its ``pieces``: (text,
    box (x0, y0, x1, y1) in pixels of ``image``) of each separately printed run of text.
    """

    image: Image.Image
    truth: list[str]
    kind: str
    dpi: int
    pieces: list[tuple[str, Box]]


Box = tuple[float, float, float, float]


def _put(draw: ImageDraw.ImageDraw, xy: tuple[float, float], text: str, font: ImageFont.FreeTypeFont,
         pieces: list[tuple[str, Box]]) -> None:
    """Draw ``text`` at ``xy`` in black and record it with its ink box."""
    draw.text(xy, text, font=font, fill=0)
    x0, y0, x1, y1 = font.getbbox(text)
    pieces.append((text.strip(), (xy[0] + x0, xy[1] + y0, xy[0] + x1, xy[1] + y1)))


@cache
def font_path(name: str) -> str | None:
    """The installed file whose name is ``name`` (first match under /usr/share/fonts), or None."""
    hits = sorted(glob.glob(f"/usr/share/fonts/**/{name}", recursive=True))
    return hits[0] if hits else None


@lru_cache(maxsize=256)
def _font(name: str, px: int) -> ImageFont.FreeTypeFont:
    path = font_path(name)
    if path is None:
        raise FileNotFoundError(f"font {name} is not installed")
    return ImageFont.truetype(path, px)


def _installed(names: tuple[str, ...]) -> list[str]:
    return [n for n in names if font_path(n)]


def _money(rng: random.Random, hi: float = 40.0) -> float:
    return round(rng.uniform(0.3, hi), 2)


def _receipt(rng: random.Random, zh: bool) -> tuple[Image.Image, list[str], list[tuple[str, Box]]]:
    """An 80 mm receipt drawn at RENDER_DPI (gray, black ink) and its rows."""
    face = rng.choice(_installed(RECEIPT_FACES))
    px = round(rng.uniform(7, 10) / 72 * deg.RENDER_DPI)
    font = _font(face, px)
    zh_font = _font(rng.choice(_installed(ZH_FACES)), px) if zh else font
    width, margin, pitch = round(80 / 25.4 * deg.RENDER_DPI), round(0.06 * 80 / 25.4 * deg.RENDER_DPI), int(px * 1.45)
    rows: list[tuple[str, str, bool]] = []  # (left, right, centred)
    if zh:
        rows.append((rng.choice(("华联", "永辉", "家乐")) + rng.choice(("超市", "便利店", "百货商店")), "", True))
    else:
        shop = rng.choice(("FRESH MART", "CORNER STORE", "CITY GROCER"))
        rows.append((f"{rng.choice(_TOWNS).upper()} {shop}", "", True))
    rows.append((f"{rng.randint(1, 999)} {rng.choice(_STREETS)}", "", True))
    rows.append((f"TEL {rng.randint(200, 999)}-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}", "", True))
    day = f"{rng.randint(1, 28):02d}/{rng.randint(1, 12):02d}/20{rng.randint(18, 26)}"
    rows.append((day, f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}", False))
    rows.append((f"{'收银员' if zh else 'CASHIER'} {rng.randint(1, 99):02d}", f"#{rng.randint(1000, 99999)}", False))
    total = 0.0
    for _ in range(rng.randint(5, 12)):
        name = rng.choice(_ZH_ITEMS) if zh else f"{rng.choice(_ADJ)} {rng.choice(_ITEMS)}" if rng.random() < 0.5 \
            else rng.choice(_ITEMS)
        qty, price = rng.randint(1, 4), _money(rng, 25.0)
        amount = round(qty * price, 2)
        total += amount
        if qty > 1:
            rows.append((name, "", False))
            rows.append((f"  {qty} x {price:.2f}", f"{amount:.2f}", False))
        else:
            rows.append((name, f"{amount:.2f}", False))
    tax_rate = rng.choice((5, 6, 7.5, 8, 10, 13))
    tax = round(total * tax_rate / 100, 2)
    cash = float(int(total + tax) + rng.choice((1, 5, 10, 20)))
    labels = ("小计", f"税 {tax_rate}%", "合计", "现金", "找零") if zh else \
        ("SUBTOTAL", f"TAX {tax_rate}%", "TOTAL", "CASH", "CHANGE")
    for label, value in zip(labels, (total, tax, total + tax, cash, cash - total - tax), strict=True):
        rows.append((label, f"{value:.2f}", False))
    rows.append(("谢谢惠顾" if zh else rng.choice(("THANK YOU", "THANK YOU FOR SHOPPING", "PLEASE COME AGAIN")), "",
                 True))
    img = Image.new("L", (width, pitch * (len(rows) + 4)), 255)
    draw = ImageDraw.Draw(img)
    y, truth = pitch, []
    pieces: list[tuple[str, Box]] = []
    for k, (left, right, centred) in enumerate(rows):
        f = zh_font if zh and any(ord(c) > 0x2E80 for c in left) else font
        x = (width - f.getlength(left)) / 2 if centred else margin
        _put(draw, (x, y), left, f, pieces)
        if right:
            _put(draw, (width - margin - font.getlength(right), y), right, font, pieces)
        truth.append(f"{left.strip()} {right}".strip())
        y += pitch
        if k in (2, 4, len(rows) - 7, len(rows) - 2):  # dashed separators, drawn (not text)
            for x0 in range(margin, width - margin, px // 2):
                draw.line([(x0, y + pitch // 4), (x0 + px // 4, y + pitch // 4)], fill=0, width=max(1, px // 12))
            y += pitch // 2
    return img.crop((0, 0, width, y + pitch)), truth, pieces


def _form(rng: random.Random) -> tuple[Image.Image, list[str], list[tuple[str, Box]]]:
    """A letter-size form at RENDER_DPI: title, labelled fields on underlines and in boxes."""
    w, h = round(8.5 * deg.RENDER_DPI), round(11 * deg.RENDER_DPI)
    img = Image.new("L", (w, h), 255)
    draw = ImageDraw.Draw(img)
    label_font = _font(rng.choice(_installed(("LiberationSans-Regular.ttf", "DejaVuSans.ttf",
                                              "NimbusSans-Regular.otf"))), round(10 / 72 * deg.RENDER_DPI))
    value_font = _font(rng.choice(_installed(FORM_FACES)), round(rng.uniform(10, 12) / 72 * deg.RENDER_DPI))
    title_font = _font(rng.choice(_installed(FORM_FACES)), round(16 / 72 * deg.RENDER_DPI))
    margin, y = round(0.8 * deg.RENDER_DPI), round(0.8 * deg.RENDER_DPI)
    title = rng.choice(("APPLICATION FORM", "CLAIM FORM", "Registration Form", "Change of Address", "INVOICE"))
    pieces: list[tuple[str, Box]] = []
    _put(draw, (margin, y), title, title_font, pieces)
    truth, y = [title], y + int(title_font.size * 2.2)
    pitch = int(value_font.size * 2.6)
    for label in rng.sample(_LABELS, rng.randint(8, 12)):
        value = _value(rng, label)
        boxed = rng.random() < 0.35
        _put(draw, (margin, y), f"{label}:", label_font, pieces)
        x = margin + round(2.2 * deg.RENDER_DPI)
        asc, desc = value_font.getmetrics()
        if boxed:
            right = x + value_font.getlength(value) + rng.randint(30, 400)
            draw.rectangle([x - 12, y - 14, right, y + asc + desc + 12], outline=0, width=rng.randint(2, 4))
        else:
            base = y + asc + rng.randint(1, max(2, desc // 2))  # the rule through the descenders
            draw.line([(x - 10, base), (w - margin, base)], fill=0, width=rng.randint(2, 4))
        _put(draw, (x, y), value, value_font, pieces)
        truth.append(f"{label}: {value}")
        y += pitch
        if y > h - margin - pitch:
            break
    return img, truth, pieces


def _value(rng: random.Random, label: str) -> str:
    """A typed value for the field ``label``."""
    if "ate" in label:
        return f"{rng.randint(1, 28):02d}/{rng.randint(1, 12):02d}/{rng.randint(1950, 2026)}"
    if label in ("Amount",):
        return f"${rng.randint(10, 99999):,}.{rng.randint(0, 99):02d}"
    if label in ("Telephone",):
        return f"+1 {rng.randint(200, 999)} {rng.randint(100, 999)} {rng.randint(1000, 9999)}"
    if label == "Email":
        return f"{rng.choice(_FIRST).lower()}.{rng.choice(_LAST).lower()}@example.{rng.choice(('com', 'org'))}"
    if label in ("Address",):
        return f"{rng.randint(1, 999)} {rng.choice(_STREETS)}"
    if label in ("City", "Employer"):
        return rng.choice(_TOWNS) + ("" if label == "City" else f" {rng.choice(('Ltd', 'Inc.', 'GmbH'))}")
    if label == "Postcode":
        return f"{rng.randint(10000, 99999)}"
    if label == "Name":
        return f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
    letters = "ABCDEFGHJKLMNPQRSTUVWXYZ"
    return f"{rng.choice(letters)}{rng.choice(letters)}-{rng.randint(100000, 9999999)}"


def make_document(seed: int, degrade: bool = True) -> ScanDocument:
    """Document number ``seed``: kind ``KINDS[seed % len(KINDS)]``, everything else drawn from
    ``random.Random(seed)``. ``degrade=False`` gives the same layout and text printed cleanly (black
    ink, resampled to 200-300 dpi, no noise; kind ``clean_<kind>``): the pages a calibration must also
    know, where the model reads well. Raises FileNotFoundError when none of a kind's faces is installed.
    """
    kind = KINDS[seed % len(KINDS)]
    rng = random.Random(seed)
    dpi = rng.choice((150, 175, 200))
    if kind.startswith("receipt"):
        img, truth, pieces = _receipt(rng, zh=kind == "receipt_zh")
        if degrade:
            img = deg.dot_matrix(img, rng) if kind == "receipt_dotmatrix" else deg.thermal(img, rng)
    else:
        img, truth, pieces = _form(rng)
    if not degrade:
        dpi = rng.choice((200, 250, 300))
        f = dpi / deg.RENDER_DPI
        page = img.resize((round(img.width * f), round(img.height * f)), Image.Resampling.BOX)
        pieces = [(t, (b[0] * f, b[1] * f, b[2] * f, b[3] * f)) for t, b in pieces if t]
        return ScanDocument(page.convert("RGB"), truth, f"clean_{kind}", dpi, pieces)
    dpi = {"form_photo": 200, "form_fax": 204}.get(kind, dpi)
    sx = dpi / deg.RENDER_DPI
    sy = 196 / deg.RENDER_DPI if kind == "form_fax" else sx  # a fax's 98-dpi rows, each shown twice
    pieces = [(t, (b[0] * sx, b[1] * sy, b[2] * sx, b[3] * sy)) for t, b in pieces]
    img = deg.fax(img, rng) if kind == "form_fax" else deg.rescan(img, rng, dpi)
    if kind == "form_photo":
        img, move = deg.photo_warp(img, rng)
        pieces, dpi = [(t, move(b)) for t, b in pieces], 0
    if rng.random() < 0.5:
        img = deg.jpeg(img, rng.randint(35, 80))
    return ScanDocument(img.convert("RGB"), truth, kind, dpi, [(t, b) for t, b in pieces if t])
