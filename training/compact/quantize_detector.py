"""Build the int8 PP-OCR line detector the compact encoder runs (``models/compact/detector/``).

The DB detector's forward (``PP-OCRv6_det_small.onnx`` from the rapidocr wheel, float32) was two
thirds of the encoder's CPU time on a letter page (0.9-1.8 s of 3-4 s, one thread). Static int8
quantisation with onnxruntime (``quantize_static``: QOperator format, i.e. ``QLinearConv``; weights
int8 per output channel, activations uint8 per tensor, ranges from min/max over calibration inputs)
runs the same network 1.45 x faster on this AVX2 CPU (a 1,248 x 1,600 input: 1.75 -> 1.2 s).

Kept in float32: the first convolution, the one on the image itself. Quantised too, the detector
merged and split the lines of small print -- rendered letter pages of 6-8 pt text (DejaVu Serif /
Sans, 200-300 dpi; 14 lines each): 11-17 lines found, CER 11.4 % over six pages, against 14 lines
and 0.13 % in float32; 2.4 % of the probability map's pixels crossed the 0.3 threshold on the
calibration inputs. With it in float32: 14 lines each, 0.37 % CER, 0.8 % of pixels, at the same speed
(the output head kept in float32 as well: no better, 0.1 s slower).

GELU in one node (:func:`fuse_gelu`, applied to the quantised graph): the quantiser cuts each of the
network's 13 GELUs, ``x * 0.5 * (1 + erf(x / sqrt 2))``, into seven nodes -- dequantise, ``Div``,
``Erf``, quantise, ``QLinearAdd``, two ``QLinearMul`` -- each a full pass over the feature map
(12 M values at the first stage of a letter page). They are replaced by dequantise -> ``Gelu``
(onnxruntime's ``com.microsoft`` kernel, float32) -> quantise to the last ``QLinearMul``'s scale and
zero point: one forward on a 1,248 x 1,600 input 0.56 -> 0.46 s (one thread, this AVX-512 CPU), the
same GELU without the rounding of three intermediate uint8 tensors.

Calibration inputs are what the detector itself feeds its network on real-looking pages: every
page image given is run through :meth:`models.compact.page.detect.LineDetector.detect` with the float32
network while its inputs are recorded (fine pass, large-print coarse pass, bands of tall pages,
re-detection after a turn or deskew). Use pages the evaluation does not score, e.g. those written by
``bench/layout_pages.py --seed 100 --pages 6 --no-eval --out DIR`` and
``bench/zh_pages.py --seed 100 --pages 4 --no-eval --out DIR`` (seeded: rebuilding gives the same
model).

Run: ``OMP_NUM_THREADS=1 python -m training.compact.quantize_detector DIR [DIR ...] [--out FILE]``.
Prints the calibration inputs' count and the float32 vs int8 probability maps' agreement on them
(mean absolute difference; share of pixels on different sides of the 0.3 DB threshold).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile

import numpy as np
from PIL import Image

from models.compact.page import detect
from models.compact.page.det_net import network_input, onnx_session

PAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".tif", ".tiff"}


def calibration_inputs(folders: list[pathlib.Path], long_side_px: int = 2200) -> list[np.ndarray]:
    """Network inputs [H, W, 3] uint8 BGR (H, W multiples of 32) the float32 detector sees on the page
    images in ``folders`` (rasterised page size: long side ``long_side_px``, as the encoder's mode).
    Raises FileNotFoundError when the folders hold no page image.
    """
    det = detect.LineDetector(det_model=detect.DET_FLOAT_MODEL)
    seen: list[np.ndarray] = []
    run = det.det.probability_map

    def record(bgr: np.ndarray) -> np.ndarray:
        seen.append(bgr.copy())
        return run(bgr)

    det.det.probability_map = record  # type: ignore[method-assign]
    paths = sorted(p for f in folders for p in f.iterdir() if p.suffix.lower() in PAGE_SUFFIXES)
    if not paths:
        raise FileNotFoundError(f"no page images ({', '.join(sorted(PAGE_SUFFIXES))}) in {folders}")
    for p in paths:
        with Image.open(p) as im:
            page = im.convert("RGB")
        f = long_side_px / max(page.size)
        page = page.resize((round(page.width * f), round(page.height * f)), Image.Resampling.LANCZOS)
        det.detect(page)
    return seen


class _Reader:
    """onnxruntime ``CalibrationDataReader`` over recorded inputs."""

    def __init__(self, name: str, inputs: list[np.ndarray]) -> None:
        self.name, self.it = name, iter(inputs)

    def get_next(self) -> dict[str, np.ndarray] | None:
        x = next(self.it, None)
        return None if x is None else {self.name: network_input(x)}


def quantize(inputs: list[np.ndarray], out: pathlib.Path, exclude: list[str], method: str = "MinMax") -> None:
    """Write the int8 detector to ``out`` from the float32 one, calibrated on ``inputs``; the nodes
    named in ``exclude`` stay float32; ``method``: onnxruntime ``CalibrationMethod`` name.
    """
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    name = onnx_session(detect.DET_FLOAT_MODEL, 1).get_inputs()[0].name
    reader = type("Reader", (_Reader, CalibrationDataReader), {})(name, inputs)
    with tempfile.TemporaryDirectory() as tmp:
        pre = pathlib.Path(tmp) / "pre.onnx"
        # Symbolic shape inference cannot follow the network's dynamic Resize sizes; ONNX's is enough.
        quant_pre_process(str(detect.DET_FLOAT_MODEL), str(pre), skip_symbolic_shape=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        quantize_static(str(pre), str(out), reader, quant_format=QuantFormat.QOperator, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        nodes_to_exclude=exclude, calibrate_method=CalibrationMethod[method])


def _initialiser_value(graph, name: str) -> float | None:
    """The scalar value of initialiser ``name`` of ``graph``, dequantised when a ``_quantized`` tensor
    has ``_scale`` / ``_zero_point`` siblings (onnxruntime's naming); None when it is not a scalar.
    """
    from onnx import numpy_helper

    inits = {i.name: i for i in graph.initializer}
    if name not in inits:
        return None
    a = numpy_helper.to_array(inits[name])
    if a.size != 1:
        return None
    base = name.removesuffix("_quantized")
    if base != name and base + "_scale" in inits:
        scale = float(numpy_helper.to_array(inits[base + "_scale"]))
        zero = float(numpy_helper.to_array(inits[base + "_zero_point"]))
        return (float(a) - zero) * scale
    return float(a)


def fuse_gelu(model: pathlib.Path, out: pathlib.Path) -> int:
    """Rewrite each quantised GELU of ``model`` (QOperator format) as dequantise -> ``Gelu``
    (``com.microsoft``) -> quantise and write the graph to ``out`` (may be ``model``); returns how many
    were fused. The pattern, checked node by node with its constants (sqrt 2, 1, 0.5 within uint8
    rounding), is what ``quantize_static`` makes of ``x * 0.5 * (1 + erf(x / sqrt 2))``; anything
    else is left as it is. See the module docstring for why.
    """
    import collections

    import onnx
    from onnx import helper

    m = onnx.load(str(model))
    g = m.graph
    producer = {o: n for n in g.node for o in n.output}
    consumers: dict[str, list] = collections.defaultdict(list)
    for n in g.node:
        for i in n.input:
            consumers[i].append(n)

    def only_consumer(name: str, op: str):
        c = consumers.get(name, [])
        return c[0] if len(c) == 1 and c[0].op_type == op else None

    def near(name: str, value: float, tol: float) -> bool:
        v = _initialiser_value(g, name)
        return v is not None and abs(v - value) <= tol

    replace: dict[int, list] = {}
    drop: set[int] = set()
    for erf in [n for n in g.node if n.op_type == "Erf"]:
        div = producer.get(erf.input[0])
        dq = producer.get(div.input[0]) if div is not None and div.op_type == "Div" else None
        q = only_consumer(erf.output[0], "QuantizeLinear")
        add = only_consumer(q.output[0], "QLinearAdd") if q is not None else None
        mul1 = only_consumer(add.output[0], "QLinearMul") if add is not None else None
        mul2 = only_consumer(mul1.output[0], "QLinearMul") if mul1 is not None else None
        if dq is None or dq.op_type != "DequantizeLinear" or div is None or add is None or mul1 is None \
                or mul2 is None:
            continue
        x_q = dq.input[0]
        if not (near(div.input[1], 2 ** 0.5, 1e-4) and near(add.input[3], 1.0, 0.01) and mul1.input[0] == x_q
                and near(mul2.input[3], 0.5, 0.01) and only_consumer(div.output[0], "Erf") is erf
                and len(consumers[dq.output[0]]) == 1):
            continue
        fused = erf.name + "_gelu"
        replace[id(dq)] = [
            dq,
            helper.make_node("Gelu", [dq.output[0]], [fused], name=fused, domain="com.microsoft"),
            helper.make_node("QuantizeLinear", [fused, mul2.input[6], mul2.input[7]], [mul2.output[0]],
                             name=fused + "_quantize"),
        ]
        drop |= {id(div), id(erf), id(q), id(add), id(mul1), id(mul2)}
    nodes = [x for n in g.node if id(n) not in drop for x in replace.get(id(n), [n])]
    del g.node[:]
    g.node.extend(nodes)
    used = {i for n in g.node for i in n.input}
    kept = [i for i in g.initializer if i.name in used]
    del g.initializer[:]
    g.initializer.extend(kept)
    if not any(o.domain == "com.microsoft" for o in m.opset_import):
        m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save(m, str(out))
    return len(replace)


def input_convs(model: pathlib.Path) -> list[str]:
    """Names of the convolutions that read the network's input image (kept float32: see the module
    docstring).
    """
    import onnx

    graph = onnx.load(str(model)).graph
    names = {i.name for i in graph.input}
    return [n.name for n in graph.node if n.op_type == "Conv" and n.input[0] in names]


def agreement(model: pathlib.Path, inputs: list[np.ndarray]) -> tuple[float, float]:
    """(mean |p_int8 - p_float32|, share of pixels on different sides of 0.3) over ``inputs``."""
    a, b = onnx_session(detect.DET_FLOAT_MODEL, 1), onnx_session(model, 1)
    name = a.get_inputs()[0].name
    diff, flips, n = 0.0, 0, 0
    for x in inputs:
        pa = a.run(None, {name: network_input(x)})[0]
        pb = b.run(None, {name: network_input(x)})[0]
        diff += float(np.abs(pa - pb).sum())
        flips += int(((pa > 0.3) != (pb > 0.3)).sum())
        n += pa.size
    return diff / n, flips / n


def main(argv: list[str] | None = None) -> int:
    """Calibrate, quantise, report; returns 0."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folders", nargs="+", type=pathlib.Path, help="folders of calibration page images")
    p.add_argument("--out", type=pathlib.Path, default=detect.DET_MODEL)
    p.add_argument("--exclude", nargs="*", default=None,
                   help="node names kept in float32 (default: the convolutions reading the image)")
    p.add_argument("--method", default="MinMax", choices=("MinMax", "Percentile", "Entropy"))
    args = p.parse_args(argv)
    inputs = calibration_inputs(args.folders)
    print(f"{len(inputs)} calibration inputs from {len(args.folders)} folder(s)", flush=True)
    exclude = input_convs(detect.DET_FLOAT_MODEL) if args.exclude is None else args.exclude
    quantize(inputs, args.out, exclude, args.method)
    fused = fuse_gelu(args.out, args.out)
    mad, flips = agreement(args.out, inputs)
    size_mib = args.out.stat().st_size / 2**20
    print(f"kept float32: {exclude}; GELUs fused: {fused}; wrote {args.out} ({size_mib:.1f} MiB); "
          f"vs float32 on the calibration inputs: mean |dp| {mad:.4f}, pixels across 0.3: {100 * flips:.3f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
