"""Pages per second and CER of the inkstream stack with the embedded compact model vs Tesseract.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python bench/compact_vs_tesseract.py [--in-process] [--all]``

Documents: the printed-text single pages and line images of /work/shared/eval (``pages/``,
``lines/``; ``--all`` adds the two long multi-page PDFs). ``--zh`` adds the Chinese run: the pages of
``zh/`` through the same stack, beside RapidOCR (the ``rapidocr`` package, same PP-OCRv6 models, one
thread) and Tesseract ``chi_sim+eng`` (Debian ``tesseract-ocr-chi-sim``), ``--zh-only`` runs only it.
All engines see the same documents in the same run, one after the other (the machine is shared:
compare within a run, not across runs).

Pages/s = pages / wall-clock seconds of the whole set. Our side sends ``--concurrency`` documents
at a time (default 4: a server's clients overlap, which is what lets the encoder process detect one
page while the decoder process writes another, i.e. use both cores); Tesseract reads one page at a
time with one thread, as the comparison asks. ``--concurrency 1`` gives the one-client latency view.

Our side: by default a local stack (``launcher.local_stack.LocalStack``: gateway + 1 encoder + 1
decoder process on loopback, OMP_NUM_THREADS=1 each, default settings) and ``POST /v1/ocr`` per
document, timed from upload to full text; start-up is not timed. ``--in-process`` (or when the stack
cannot start) runs the encoder and decoder halves in this process with one torch thread and a greedy
loop instead.
Tesseract: the ``tesseract`` CLI, ``OMP_THREAD_LIMIT=1``, PDF pages rasterised at 200 dpi
(rasterisation is timed for both engines). CER / WER as in ``inkstream eval`` (evaluation/run.py).

Through a stack, each service's peak resident set size over the run (``VmHWM``, bench/memory.py)
is printed, the encoder's as ``encoder_peak_rss_mib: X`` (goal <= 1,024), and the CPU each service
used while our side read the documents, in cores (CPU seconds / wall seconds, /proc/<pid>/stat):
``encoder_cores_busy`` etc. and their sum ``stack_cores_busy`` (2.0 = both cores of this machine busy:
with one document in flight, page N+1 is detected and encoded while page N decodes).

The last line is ``speed_ratio@N: X`` = our pages/s / Tesseract pages/s (> 1: we are faster) with
N = the documents in flight (``--concurrency``); with ``--repeat K`` the English documents are read K
times by each engine, alternating, on the same stack, the K ratios are printed and the last line
holds their median (run-to-run spread on these shared machines is about +-4 %); the Chinese run prints ``zh_ours_cer``,
``zh_rapidocr_cer``, ``zh_tesseract_cer`` and ``zh_speed_vs_rapidocr: X`` (our pages/s / RapidOCR's,
both one document at a time) before it.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import shutil
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluation.engines import GatewayEngine, InProcessEngine, RapidOCREngine, TesseractEngine, find_documents  # noqa: E402
from evaluation.run import print_table, run_engine, summary  # noqa: E402 - after the sys.path insert above

EVAL_DIR = pathlib.Path(__file__).resolve().parents[2] / "shared" / "eval"  # ../shared beside the repo


def warm_up(engine) -> None:
    """One request on a small rendered page that is not among the measured documents."""
    import tempfile

    from PIL import Image, ImageDraw

    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "warm-up.png"
        img = Image.new("RGB", (900, 120), "white")
        ImageDraw.Draw(img).text((20, 40), f"warm-up {time.time():.0f}", fill="black")
        img.save(path)
        engine.ocr(path)


def chinese_run(ours_res: list, ours_wall: float, docs: list, root: pathlib.Path) -> None:
    """RapidOCR and Tesseract chi_sim+eng on the Chinese documents; print the three tables and figures."""
    rapid = RapidOCREngine()
    run_engine(rapid, docs[:1], root, verbose=False)  # warm-up, not timed
    t0 = time.perf_counter()
    rapid_res = run_engine(rapid, docs, root)
    rapid_wall = time.perf_counter() - t0
    tess_res: list = []
    tess = None
    if shutil.which("tesseract"):
        tess = TesseractEngine("chi_sim+eng")
        tess_res = run_engine(tess, docs, root)
    print_table("inkstream stack (Chinese)", ours_res)
    print_table(rapid.name, rapid_res)
    if tess is not None:
        print_table(tess.name, tess_res)
    (s_o, p_o, _), (s_r, p_r, _) = summary(ours_res), summary(rapid_res)
    ours_pps, rapid_pps = p_o / max(1e-9, ours_wall), p_r / max(1e-9, rapid_wall)
    print(f"\nChinese: ours {p_o} pages in {ours_wall:.1f} s = {ours_pps:.3f} pages/s; "
          f"rapidocr {p_r} pages in {rapid_wall:.1f} s = {rapid_pps:.3f} pages/s")
    print(f"zh_ours_cer: {s_o.cer:.4f}")
    print(f"zh_rapidocr_cer: {s_r.cer:.4f}")
    if tess is not None:
        print(f"zh_tesseract_cer: {summary(tess_res)[0].cer:.4f}")
    print(f"zh_speed_vs_rapidocr: {ours_pps / max(1e-9, rapid_pps):.3f}")


def main(argv: list[str] | None = None) -> int:
    """Run both engines over the documents; print tables, pages/s and ``speed_ratio``."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", default=str(EVAL_DIR))
    p.add_argument("--in-process", action="store_true", help="halves in this process instead of a local stack")
    p.add_argument("--all", action="store_true", help="also the multi-page PDFs (29 pages, slow)")
    p.add_argument("--model", default=None, help="checkpoint (default: the embedded one, models/compact/weights_zh)")
    p.add_argument("--include", default="", help="only documents whose relative path matches this regex")
    p.add_argument("--concurrency", type=int, default=4,
                   help="documents in flight at once through the stack (a server's clients overlap; the "
                        "encoder and decoder processes then use both cores); Tesseract runs one at a time")
    p.add_argument("--zh", action="store_true",
                   help="also the Chinese run (zh/, beside RapidOCR and Tesseract chi_sim)")
    p.add_argument("--zh-only", action="store_true", help="only the Chinese run")
    p.add_argument("--repeat", type=int, default=1,
                   help="read the English documents N times with each engine, alternating (same stack); "
                        "speed_ratio is then the median of the N runs' ratios (this machine is noisy)")
    args = p.parse_args(argv)
    root = pathlib.Path(args.dir)
    folders = ("pages/", "lines/") + (("multipage/",) if args.all else ())
    selected = [(d, g) for d, g in find_documents(root)
                if not args.include or re.search(args.include, str(d.relative_to(root)))]
    docs = [] if args.zh_only else [(d, g) for d, g in selected if str(d.relative_to(root)).startswith(folders)]
    zh_docs = ([(d, g) for d, g in selected if str(d.relative_to(root)).startswith("zh/")]
               if args.zh or args.zh_only else [])
    if not docs and not zh_docs:
        print(f"no documents under {root}", file=sys.stderr)
        return 2
    if not shutil.which("tesseract"):
        print("tesseract is not installed (apt-get install tesseract-ocr)", file=sys.stderr)
        return 2

    stack = None
    if not args.in_process:
        try:
            from launcher.local_stack import LocalStack  # lazy: only when measuring through a stack

            # default settings (what `inkstream up` runs), but with --repeat the result cache off: a
            # document read again would be answered from it
            env = {"INKSTREAM_GATEWAY__STORES__CACHE_ENABLED": "false"} if args.repeat > 1 else None
            stack = LocalStack(args.model, env=env).start()
            ours = GatewayEngine(stack.gateway_url)
        except Exception as exc:  # noqa: BLE001 - no usable stack: measure the in-process path instead, say so
            print(f"local stack unavailable ({type(exc).__name__}: {exc}); using the in-process path",
                  file=sys.stderr)
            if stack is not None:
                stack.close()
            stack = None
    if stack is None:
        ours = InProcessEngine(args.model, threads=1)
    conc = args.concurrency if stack is not None else 1
    peaks: dict[str, int] = {}
    busy: dict[str, float] = {}
    walls: list[float] = []  # ours, rounds 2..N (--repeat)
    tess_walls: list[float] = []
    try:
        warm_up(ours)  # first-call allocations, not timed; a page of its own (a timed document would be a cache hit)
        from bench.memory import cpu_seconds, vm_hwm_bytes  # after the sys.path insert above

        pids = {svc: [p.pid for p in procs] for svc, procs in stack.procs.items()} if stack is not None else {}
        cpu0 = {svc: sum(cpu_seconds(p) for p in ps) for svc, ps in pids.items()}
        t0 = time.perf_counter()
        ours_res = run_engine(ours, docs, root, concurrency=conc)
        ours_wall = time.perf_counter() - t0
        busy = {svc: (sum(cpu_seconds(p) for p in ps) - cpu0[svc]) / max(1e-9, ours_wall) for svc, ps in pids.items()}
        for _ in range(1, args.repeat if docs else 1):  # more rounds, each ours then Tesseract
            t0 = time.perf_counter()
            run_engine(ours, docs, root, concurrency=conc, verbose=False)
            walls.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            run_engine(TesseractEngine(), docs, root, verbose=False)
            tess_walls.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        zh_res = run_engine(ours, zh_docs, root)
        zh_wall = time.perf_counter() - t0
        if stack is not None:
            peaks = {svc: max(vm_hwm_bytes(p.pid) for p in procs) for svc, procs in stack.procs.items() if procs}
    finally:
        if stack is not None:
            stack.close()
    if zh_docs:
        chinese_run(zh_res, zh_wall, zh_docs, root)
    if not docs:
        return 0
    tess = TesseractEngine()
    t0 = time.perf_counter()
    tess_res = run_engine(tess, docs, root)
    tess_wall = time.perf_counter() - t0

    print_table(ours.name, ours_res)
    print_table(tess.name, tess_res)
    (s_o, p_o, t_o), (s_t, p_t, _) = summary(ours_res), summary(tess_res)
    ours_pps, tess_pps = p_o / max(1e-9, ours_wall), p_t / max(1e-9, tess_wall)
    print(f"\nours ({conc} document(s) in flight): {p_o} pages in {ours_wall:.1f} s wall = {ours_pps:.3f} pages/s "
          f"(mean latency {t_o / max(1, p_o):.2f} s/page), CER {100 * s_o.cer:.2f}%")
    print(f"tesseract (one at a time): {p_t} pages in {tess_wall:.1f} s = {tess_pps:.3f} pages/s, "
          f"CER {100 * s_t.cer:.2f}%")
    for svc, v in peaks.items():
        print(f"{svc}_peak_rss_mib: {v / 2**20:.0f}")
    for svc, b in busy.items():
        print(f"{svc}_cores_busy: {b:.2f}")
    if busy:
        print(f"stack_cores_busy: {sum(busy.values()):.2f}")
    print(f"ours_cer: {s_o.cer:.4f}")
    print(f"tesseract_cer: {s_t.cer:.4f}")
    ratios = [tess_wall / max(1e-9, ours_wall)] + [t / max(1e-9, o) for o, t in zip(walls, tess_walls, strict=True)]
    if len(ratios) > 1:  # same documents each round: the ratio of walls is the ratio of pages/s
        print(f"speed_ratio@{conc} per round: {' '.join(f'{r:.3f}' for r in ratios)}")
    print(f"speed_ratio@{conc}: {statistics.median(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
