"""At interpreter exit the ``/metrics`` listener closes before the MeterProvider shuts down.

The OTel SDK shuts the provider down in an atexit hook, which unregisters the Prometheus collector; a
scrape that reached a still-open listener after that read an empty exposition (every counter absent,
as if the process had restarted) — seen as a drain test reading ``tokens == 0`` from a decoder in its
last milliseconds.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import httpx
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from inkstream import telemetry

    original = PrometheusMetricReader.shutdown

    def shutdown(self, *args, **kwargs):
        # Runs inside the SDK's atexit hook: scrape our own port as a Prometheus server would.
        try:
            body = httpx.get(f"http://127.0.0.1:{PORT}/metrics", timeout=2).text
            print("SCRAPE", "counter" if "probe_events_total" in body else "empty", flush=True)
        except httpx.HTTPError:
            print("SCRAPE refused", flush=True)
        return original(self, *args, **kwargs)

    PrometheusMetricReader.shutdown = shutdown
    telemetry.setup_metrics("probe")
    PORT = telemetry.serve_metrics(0)
    telemetry.meter("probe").create_counter("probe_events").add(3)
    assert "probe_events_total" in httpx.get(f"http://127.0.0.1:{PORT}/metrics", timeout=2).text
    print("SERVING", flush=True)
""")


def test_metrics_listener_closes_before_the_meter_provider_shuts_down():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    assert "SERVING" in lines, out.stdout
    # Never "empty": the port no longer answers once the counters are gone.
    assert "SCRAPE refused" in out.stdout, out.stdout + out.stderr
