"""report.html in a real headless browser (Debian's chromium): it renders, every plot loads,
and no script or resource error is raised."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SimFactory, only_run_dir, run_cli
from tests.integration.test_faults import _spec

pytestmark = pytest.mark.slow  # whole runs against the simulated engine, seconds each

WriteSpec = Callable[..., Path]

# Appended to a copy of the report: after load, write what the page saw into the DOM, which
# chromium's --dump-dom prints.
_PROBE = """<script>
window.__errors = [];
window.addEventListener("error", e => window.__errors.push(String(e.message || e.target.src || "error")), true);
window.addEventListener("load", () => {
  const imgs = Array.from(document.images);
  const loaded = imgs.filter(i => i.complete && i.naturalWidth > 0).length;
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = `images=${imgs.length} loaded=${loaded} errors=${window.__errors.length} ` +
                    `verdict=${(document.getElementById("verdict") || {}).textContent}`;
  document.body.appendChild(out);
});
</script>"""


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("chromium is not installed: run scripts/setup.sh --test (it installs Debian's chromium)")
    return path


def browser_probe(page: Path, tmp_path: Path) -> dict[str, str]:
    """Open a copy of `page` with the probe in headless chromium; returns the probe's fields."""
    probed = tmp_path / f"probed-{page.name}"
    probed.write_text(page.read_text().replace("</body>", _PROBE + "</body>"))
    result = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
         "--dump-dom", probed.as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    match = re.search(r'<pre id="probe">(.*?)</pre>', result.stdout)
    assert match, f"the page did not finish loading in chromium: {result.stderr[-2000:]}"
    fields = dict(item.split("=", 1) for item in match.group(1).split(" ", 3))
    return fields


def test_run_report_renders_in_chromium_with_every_plot(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "10", "--itl-ms", "2", "--fault", "http500:9")
    spec = write_spec(_spec(url, {"pattern": "poisson", "rate_per_s": 30, "measure": {"duration_s": 1.0}},
                            slo={"ttft.any.p99": "50ms"}))
    run_cli("run", str(spec), "--out", str(tmp_path / "out"), "--quiet")
    run = only_run_dir(tmp_path / "out")
    page = run / "report.html"
    assert all((run / "plots" / name).stat().st_size > 10_000 for name in ("latency_cdf.png", "per_request.png"))
    fields = browser_probe(page, tmp_path)
    # three images: the ECDFs, the per-request points, the timeline
    assert fields["images"] == "3" and fields["loaded"] == "3" and fields["errors"] == "0"
    assert fields["verdict"] == "Result is: INVALID"  # 1 in 9 requests fails: error rate above 1 %
    text = page.read_text()
    assert "FAIL <code>error_rate</code>" in text and "SLO" in text
    assert "](plots/latency_cdf.png)" in (run / "report.md").read_text()
