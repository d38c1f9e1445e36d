"""`--format html`: one self-contained page per check / estimate / plan, rendered by a real
headless Chromium (skipped, with a message, where none is installed)."""
from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
import zlib
from html.parser import HTMLParser

import pytest

from memlint.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "fixtures", "examples", "llama3-8b-h100.memlint.toml")
MIXTRAL = os.path.join(ROOT, "fixtures", "adapters", "megatron", "good", "mixtral_8x7b.sh")


class Outline(HTMLParser):
    """Tags with their classes, as a list of (tag, attrs) and the text."""

    def __init__(self):
        super().__init__()
        self.tags = []
        self.text = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def count(self, tag, cls=None):
        return sum(1 for t, a in self.tags
                   if t == tag and (cls is None or cls in (a.get("class") or "").split()))


def page(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr().out
    outline = Outline()
    outline.feed(out)
    return code, out, outline


def assert_self_contained(text):
    lowered = text.lower()
    assert "<script" not in lowered and "http://" not in lowered and "https://" not in lowered
    assert "<link" not in lowered and "@import" not in lowered and " src=" not in lowered


def test_estimate_page_structure(capsys):
    code, text, outline = page(capsys, "estimate", EXAMPLE, "--format", "html")
    assert code == 0
    assert_self_contained(text)
    assert text.startswith("<!DOCTYPE html>")
    # one stage bar (stage 0) against the capacity, and one phase chart per stage
    assert outline.count("svg", "stages") == 1 and outline.count("svg", "phases") == 1
    assert outline.count("line", "capacity") == 2
    # the example's recompute=selective peak: forward end, backward start, recompute, optimizer
    for phase in ("forward end", "backward start", "recompute", "optimizer step"):
        assert phase in "".join(outline.text)
    # the term table has one row per term of the peak, each with its formula
    from memlint.adapters.registry import load_with_references
    from memlint.memory.estimate import estimate
    from memlint.scenario import build

    scenario, _ = build(list(load_with_references(EXAMPLE, 4 << 20, False)))
    stage = estimate(scenario).stages[0]
    assert outline.count("table", "terms") == 1
    body = text.split('<table class="terms">')[1].split("</table>")[0]
    assert body.count("<tr>") == len(stage.terms) + 2  # + header and footer rows
    for term in stage.terms:
        assert f"<code>{term.name}</code>" in body


def test_check_page_lists_diagnostics_and_every_stage(capsys):
    code, text, outline = page(capsys, "check", MIXTRAL, "--format", "html")
    assert_self_contained(text)
    assert outline.count("section", "diagnostics") == 1
    assert outline.count("svg", "phases") == 4          # pp = 4
    assert outline.count("details") == 4                # a term table per stage


def test_plan_page_ranks_layouts(capsys):
    code, text, outline = page(capsys, "plan", "--model", "llama3-70b", "--gpus", "16",
                               "--seq-len", "8192", "--global-batch", "512", "--top", "3",
                               "--format", "html")
    assert code == 0
    assert_self_contained(text)
    assert outline.count("table", "plans") == 1
    assert text.split('<table class="plans">')[1].split("</table>")[0].count("<tr>") == 4
    assert outline.count("svg", "stages") == 3


# ---------------------------------------------------------------------------------------------
# A real browser


def _browser():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


BROWSER = _browser()
# .ci/run installs Chromium and sets this, so that in CI a missing browser fails instead of skipping
REQUIRED = os.environ.get("MEMLINT_REQUIRE_BROWSER") == "1"
needs_browser = pytest.mark.skipif(
    BROWSER is None and not REQUIRED, reason="no headless Chromium installed (apt-get install "
    "chromium): the HTML is checked structurally above, not rendered")


def _headless(*args, timeout=90):
    assert BROWSER is not None, "MEMLINT_REQUIRE_BROWSER=1 but no Chromium is installed"
    # no profile, no background connections: the machine may have no network at all
    profile = tempfile.mkdtemp(prefix="memlint-chromium-")
    try:
        return subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu",
                               "--disable-dev-shm-usage", "--hide-scrollbars", "--no-first-run",
                               "--disable-background-networking", "--disable-component-update",
                               "--disable-sync", "--disable-quic", f"--user-data-dir={profile}",
                               *args], capture_output=True, text=True, timeout=timeout)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def read_png(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB/RGBA, non-interlaced PNG."""
    with open(path, "rb") as handle:
        data = handle.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        pos += 12 + length
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(b"".join(chunks))
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if kind == 1:
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 255
        elif kind == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, previous))
        elif kind == 3:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 255
        elif kind == 4:
            for i in range(stride):
                a = line[i - channels] if i >= channels else 0
                b = previous[i]
                c = previous[i - channels] if i >= channels else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 255
        rows.append([tuple(line[i:i + 3]) for i in range(0, stride, channels)])
        previous = line
    return width, height, rows


def _hex(color):
    return tuple(int(color[i:i + 2], 16) for i in (1, 3, 5))


@pytest.mark.slow  # starts a headless browser
@needs_browser
def test_chromium_renders_the_bundled_example(tmp_path, capsys):
    from memlint.report.html_format import CAPACITY_COLOR, COLORS

    code, text, _ = page(capsys, "estimate", EXAMPLE, "--format", "html")
    target = tmp_path / "example.html"
    target.write_text(text, encoding="utf-8")
    dom = _headless("--dump-dom", target.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    rendered = Outline()
    rendered.feed(dom.stdout)
    assert rendered.count("svg", "stages") == 1 and rendered.count("rect", "seg") >= 8
    shot = tmp_path / "example.png"
    result = _headless(f"--screenshot={shot}", "--window-size=1000,760", target.as_uri())
    assert shot.exists(), result.stderr[-2000:]
    width, height, rows = read_png(shot)
    assert (width, height) == (1000, 760)
    # the stage bar's components and the capacity line are drawn in their colours
    counts = {}
    for row in rows:
        for pixel in row:
            counts[pixel] = counts.get(pixel, 0) + 1
    for component in ("weights", "gradients", "optimizer", "activations"):
        assert counts.get(_hex(COLORS[component]), 0) > 200, component
    assert counts.get(_hex(CAPACITY_COLOR), 0) > 40
    # the page is mostly background: a blank or broken render fails here
    assert counts.get((255, 255, 255), 0) > width * height // 3


def _cells(row: str) -> list:
    return [c.split("</td>")[0].replace("<b>", "").replace("</b>", "")
            for c in row.split('<td class="num">')[1:]]


def test_stage_table_has_the_three_numbers_of_the_json(capsys):
    """The stage table's allocated / reserved / device columns are the JSON output's
    allocated_bytes / reserved_bytes / device_bytes of each stage (here in GiB, 2 decimals)."""
    import json

    code, text, _outline = page(capsys, "estimate", MIXTRAL, "--format", "html")
    assert code in (0, 1)
    table = text.split('<table class="stage-table">')[1].split("</table>")[0]
    head = table.split("</thead>")[0]
    assert "<th class=\"num\">allocated</th><th class=\"num\">reserved</th>" \
           "<th class=\"num\">device</th>" in head
    columns = [h.split("</th>")[0] for h in head.split('<th class="num">')[1:]]
    main(["estimate", MIXTRAL, "--format", "json"])
    stages = json.loads(capsys.readouterr().out)["estimates"][0]["stages"]
    rows = table.split("<tbody>")[1].split("</tr>")[:-1]
    assert len(rows) == len(stages) > 1
    for row, stage in zip(rows, stages):
        cells = dict(zip(columns[1:], _cells(row)[1:]))   # past "layers"
        for name in ("allocated", "reserved", "device"):
            assert cells[name] == f"{stage[f'{name}_bytes'] / 2**30:.2f}", (name, stage["stage"])
        assert float(cells["allocated"]) <= float(cells["reserved"]) <= float(cells["device"])
    assert "allocated: tensors at the peak" in text
