"""A table page read through the gateway reaches the client with every table cell, over gRPC
(client.gateway_client) and over REST NDJSON (client.ocr_cli), equal to the gateway's own page
result (gateway.output.stitch.page_result of the same outcome)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import uvicorn

from client import ocr_cli
from client.gateway_client import AsyncGatewayClient, GatewayClient
from gateway.apis.grpc_api import build_grpc_server
from gateway.apis.rest import create_app
from gateway.core import GatewayCore
from gateway.output.stitch import page_result
from gateway.types import PageInput, PageOutcome, PipelineOptions, SegmentText
from inkstream.page_result import PageResult
from inkstream.segments import Cell, cell_join
from tests.gateway_api.conftest import FakePipeline, marked_page, png_bytes

pytestmark = pytest.mark.timeout(60)

SIZE = (600, 800)  # the document page, pixels
ROWS = [["Name", "City", "No."], ["Maxim Integrated", "San Jose", "150"], ["Leidos", "El Segundo", "72"]]


def table_outcome(index: int, w: int, h: int) -> PageOutcome:
    """A title line, a 3 x 3 table (one cell in two pieces) and a footer on a ``w`` x ``h`` page, each
    segment with its own confidence; boxes at odd fractions of the page so that they scale.
    """
    segs = [SegmentText(0, "Report", (0.05 * w, 0.02 * h, 0.4 * w, 0.05 * h), confidence=0.97, generated_tokens=3)]
    for r, row in enumerate(ROWS):
        for c, text in enumerate(row):
            x0, y0 = (0.05 + 0.3 * c) * w, (0.1 + 0.05 * r) * h
            segs.append(SegmentText(len(segs), text, (x0, y0, x0 + 0.17 * w, y0 + 0.033 * h),
                                    join=cell_join(Cell(1, r, c)), confidence=0.61 + 0.037 * len(segs),
                                    generated_tokens=1 + len(text)))
    segs.insert(5, SegmentText(0, "Corp.", (0.23 * w, 0.15 * h, 0.31 * w, 0.183 * h), join="space",
                               confidence=0.42, generated_tokens=4))
    segs.append(SegmentText(0, "Page 1", (0.05 * w, 0.9 * h, 0.2 * w, 0.93 * h), confidence=0.88, generated_tokens=4))
    for i, s in enumerate(segs):
        s.index = i
    return PageOutcome(index, "ok", segments=segs, finish_reason="stop", vision_tokens=256,
                       generated_tokens=sum(s.generated_tokens for s in segs), width=w, height=h)


class TablePipeline(FakePipeline):
    """Every page reads as :func:`table_outcome` of the image the encoder would get; the outcomes are
    kept (``outcomes``) so the test can stitch the gateway's own result from them.
    """

    def __init__(self) -> None:
        super().__init__()
        self.outcomes: list[PageOutcome] = []

    async def run(self, pages: AsyncIterator[PageInput], options: PipelineOptions) -> AsyncIterator[PageOutcome]:
        async for page in pages:
            out = table_outcome(page.index, page.width, page.height)
            self.outcomes.append(out)
            yield out


def expected(pipeline: TablePipeline) -> PageResult:
    return page_result(pipeline.outcomes[0], doc_size=SIZE)


def assert_same_page(got: PageResult, want: PageResult, box_abs: float, conf_abs: float) -> None:
    """``got`` equals ``want`` field by field, floats within the transport's precision."""
    assert [b.type for b in got.blocks] == [b.type for b in want.blocks]
    table = want.blocks[-1]
    assert table.type == "table" and len(table.cells) == 9 and any(" " in c.text for c in table.cells)
    for g, w in zip(got.blocks, want.blocks, strict=True):
        assert (g.text, g.warnings) == (w.text, w.warnings)
        assert g.box == pytest.approx(w.box, abs=box_abs) and g.confidence == pytest.approx(w.confidence, abs=conf_abs)
        assert [(c.row, c.column, c.rowspan, c.colspan, c.text) for c in g.cells] == \
               [(c.row, c.column, c.rowspan, c.colspan, c.text) for c in w.cells]
        for gc, wc in zip(g.cells, w.cells, strict=True):
            assert gc.box == pytest.approx(wc.box, abs=box_abs)
            assert gc.confidence == pytest.approx(wc.confidence, abs=conf_abs) and 0.4 < gc.confidence < 1.0
    scalars = ("index", "status", "text", "finish_reason", "vision_tokens", "generated_tokens", "error", "width",
               "height", "warnings")
    assert {k: getattr(got, k) for k in scalars} == {k: getattr(want, k) for k in scalars}
    assert got.confidence == pytest.approx(want.confidence, abs=conf_abs)


@pytest.fixture
def document(tmp_path):
    path = tmp_path / "table.png"
    path.write_bytes(png_bytes(marked_page(1, SIZE)))
    return path


async def test_table_cells_survive_grpc_to_the_client(gw_config, document):
    pipeline = TablePipeline()
    core = GatewayCore(gw_config, pipeline)
    core.start()
    server, port, _ = await build_grpc_server(core, 0)
    try:
        async with AsyncGatewayClient(f"127.0.0.1:{port}", timeout_s=30) as c:
            res = await c.recognize(document.read_bytes(), format="json")
        [page] = res.pages
        assert_same_page(page, expected(pipeline), box_abs=1e-3, conf_abs=1e-6)  # float32 on the wire

        # the job path: SubmitJob, then GetJobResult's pages, kept in the result store as JSON (0.1 px)
        with GatewayClient(f"127.0.0.1:{port}", timeout_s=30) as c:
            job = await asyncio.to_thread(c.submit_job, document, format="json")
            for _ in range(200):
                if (await asyncio.to_thread(c.get_job, job.job_id)).status == "done":
                    break
                await asyncio.sleep(0.05)
            [job_page] = (await asyncio.to_thread(c.job_result, job.job_id)).pages
        assert_same_page(job_page, expected(pipeline), box_abs=0.051, conf_abs=5.1e-5)
    finally:
        await server.stop(None)
        await core.close()


async def test_table_cells_survive_rest_ndjson_to_the_client(gw_config, document):
    pipeline = TablePipeline()
    core = GatewayCore(gw_config, pipeline)
    app = create_app(gw_config, pipeline, core)
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
    task = asyncio.create_task(srv.serve())
    try:
        while not srv.started:
            await asyncio.sleep(0.02)
        url = f"http://127.0.0.1:{srv.servers[0].sockets[0].getsockname()[1]}"
        pages, _ = await asyncio.to_thread(ocr_cli.stream_pages, url, document, {"format": "json"}, progress=False)
        [page] = pages
        assert_same_page(page, expected(pipeline), box_abs=0.05 + 1e-9, conf_abs=5e-5 + 1e-12)  # JSON rounding
        assert page.to_dict() == expected(pipeline).to_dict()
    finally:
        srv.should_exit = True
        await task
        await core.close()
