"""The HTML report framework on an example report (toy DataFrame, an altair chart saved with save_figure), and
the browser harness itself (it must see the errors it is meant to catch)."""

from __future__ import annotations

import base64
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import altair as alt
import polars as pl
import pytest

from pipeline.core.figures import save_figure
from pipeline.core.manifest import RunManifest, sha256_file
from pipeline.report.html import (
    Callout,
    Facts,
    Figure,
    Link,
    Prose,
    Table,
    render_index,
    render_report,
    write_table_exports,
)
from tests.integration.browser import open_page, render_page

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "reports" / "screenshots"
SAMPLE = REPO.parent / "shared" / "samples" / "arc-agi-3" / "fixtures" / "an53_scripted-win.frames.jsonl"


class Page(HTMLParser):
    """What the tests look at in a page: ids, links, images, scripts, table cells."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.hrefs: list[str] = []
        self.imgs: list[dict[str, str]] = []
        self.scripts = 0
        self.cells: list[str] = []
        self._in_td = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "a" and "href" in a:
            self.hrefs.append(a["href"])
        if tag == "img":
            self.imgs.append(a)
        if tag == "script":
            self.scripts += 1
        if tag == "td":
            self._in_td = True
            self.cells.append("")

    def handle_endtag(self, tag):
        if tag == "td":
            self._in_td = False

    def handle_data(self, data):
        if self._in_td:
            self.cells[-1] += data


def toy_frame() -> pl.DataFrame:
    return pl.DataFrame({
        "game_id": ["an53-6f5f2264", "an53-6f5f2264", "ck17-8ce0c519", "ck17-8ce0c519"],
        "level_index": [1, 2, 1, 2],
        "baseline_value": [7.0, 18.5, None, 23.123456],
        "n_completers": [12, 9, 0, 1500],
        "costs": [[5, 7, 9], [18, 19], [], [23]],
        "is_default_rule": [True, True, False, True],
    })


@pytest.fixture
def example(tmp_path: Path) -> dict:
    out_dir = tmp_path / "demo"
    df = toy_frame()
    chart = alt.Chart(df.drop("costs")).mark_bar().encode(
        x=alt.X("level_index:O", title="level"), y=alt.Y("n_completers:Q", title="completers"),
        color="game_id:N", xOffset="game_id:N").properties(width=320, height=180, title="Completers by level")
    fig = save_figure(chart, out_dir / "figures", "completers")
    manifest = RunManifest(command="pytest example report", config={"rule": "upper-median"}, seeds={"demo": 7},
                           policy_ids=["arc-agi-3/2026-04"])
    manifest.add_input(SAMPLE)
    sections = [
        Prose("What this shows", "Toy numbers for two games, <b>not</b> real data.\n\nA second paragraph."),
        Facts("Key numbers", {"games": 2, "levels": 4, "mean completers": 380.25, "note": None}),
        Figure("Completers by level", fig, caption="Bars per game and level."),
        Table("Level baselines", df, name="level_baselines", caption="One row per game and level."),
        Table("First rows only", df, name="first_rows", max_rows=2),
        Callout("Caveats", ["ck17 level 1 has no completer", "values are invented"], kind="warning"),
        Prose("What this shows", "A repeated title gets its own anchor."),
    ]
    html_path = render_report("Example report", sections, manifest, out_dir / "example.html",
                              subtitle="Built by the framework test")
    manifest.add_output(html_path)
    index = render_index("Demo outputs", [
        Link("Example report", html_path, "every section kind", "Reports"),
        Link("Level baselines (CSV)", out_dir / "level_baselines.csv", "", "Tables"),
        ("Completers (Vega-Lite spec)", fig["json"], "", "Figures"),
        ("ARC Prize", "https://arcprize.org/", "an external link is kept as is", "Elsewhere"),
    ], manifest, out_dir / "index.html", intro="Everything the example wrote.")
    return {"dir": out_dir, "html": html_path, "index": index, "fig": fig, "df": df, "manifest": manifest}


def test_report_structure_escaping_and_embedding(example: dict):
    text = example["html"].read_text()
    page = Page(text)
    titles = ["what-this-shows", "key-numbers", "completers-by-level", "level-baselines", "first-rows-only",
              "caveats", "what-this-shows-2", "run-manifest"]
    for anchor in titles:
        assert anchor in page.ids and f"#{anchor}" in page.hrefs  # each section is in the table of contents
    assert "&lt;b&gt;not&lt;/b&gt;" in text and "<b>not</b>" not in text  # prose is text, never markup
    assert page.scripts == 0
    assert not re.search(r"""(src|href)=["']https?:""", text)  # self-contained: nothing from the network
    png = next(img for img in page.imgs if img.get("data-format") == "png")  # the figure as drawn (issue 29)
    assert png["src"].startswith("data:image/png;base64,")
    assert base64.b64decode(png["src"].split(",", 1)[1]) == example["fig"]["png"].read_bytes()
    assert "figures/completers.vl.json" in page.hrefs and "figures/completers.png" in page.hrefs
    assert '<aside class="callout warning"' in text
    assert "380.2" in text and "1,500" in text and "23.12" in text  # formatted numbers
    assert "first 2 shown" in text and text.count('data-rows="4"') == 2


def test_table_exports_and_manifest(example: dict):
    out_dir, df, manifest = example["dir"], example["df"], example["manifest"]
    assert pl.read_parquet(out_dir / "level_baselines.parquet").equals(df)
    csv = pl.read_csv(out_dir / "level_baselines.csv")
    assert [json.loads(c) for c in csv["costs"]] == df["costs"].to_list()  # nested values as JSON text
    assert csv["baseline_value"].to_list() == df["baseline_value"].to_list()
    page = Page(example["html"].read_text())
    assert {"level_baselines.csv", "level_baselines.parquet", "first_rows.csv"} <= set(page.hrefs)
    for name in ("level_baselines.csv", "level_baselines.parquet", "first_rows.parquet"):
        path = out_dir / name
        assert manifest.outputs[str(path)] == sha256_file(path)  # exports are outputs of the run
    text = example["html"].read_text()
    assert str(SAMPLE) in text and sha256_file(SAMPLE) in text
    assert "arc-agi-3/2026-04" in text and "demo=7" in text and "upper-median" in text
    with pytest.raises(ValueError):
        write_table_exports(df, out_dir, "../escape")
    with pytest.raises(ValueError, match="distinct"):  # two tables never overwrite each other's exports
        render_report("Clash", [Table("Same", df), Table("Same", df.head(1))], None, out_dir / "clash.html")


def test_index_links_resolve(example: dict):
    page = Page(example["index"].read_text())
    local = [h for h in page.hrefs if not h.startswith("https:")]
    assert local == ["example.html", "level_baselines.csv", "figures/completers.vl.json"]
    assert all((example["dir"] / h).is_file() for h in local)
    assert "https://arcprize.org/" in page.hrefs
    assert {"reports", "tables", "figures", "elsewhere", "run-manifest"} <= set(page.ids)


def test_report_and_index_in_chromium(example: dict):
    with open_page(example["html"], wait_ms=200) as page:
        assert page.evaluate("document.body.dataset.report") == "ready"
        assert page.evaluate("Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)") is True
        assert page.evaluate("document.querySelectorAll('nav.toc a').length") == 8
        page.screenshot(SCREENSHOTS / "report_example.png")
        page.emulate_media("print")  # print-friendly: sticky headers become static
        assert page.evaluate("getComputedStyle(document.querySelector('table.data th')).position") == "static"
        assert page.errors == [] and [u for u in page.requests if not u.startswith("file:")] == []
    assert render_page(example["index"], SCREENSHOTS / "report_index.png", wait_ms=100) == []
    assert (SCREENSHOTS / "report_index.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_harness_sees_errors_and_network_requests(tmp_path: Path):
    bad = tmp_path / "bad.html"
    bad.write_text("<!doctype html><html><body><p>broken</p>"
                   '<img src="http://198.51.100.7/pixel.png">'
                   "<script>console.error('deliberate console error'); undefinedFunction();</script>"
                   "</body></html>")
    errors = render_page(bad, tmp_path / "bad.png", wait_ms=200)
    assert any("deliberate console error" in e for e in errors), errors
    assert any("undefinedFunction" in e for e in errors), errors
    assert any(e.startswith("network request: http://198.51.100.7/pixel.png") for e in errors), errors
    assert (tmp_path / "bad.png").stat().st_size > 0


def test_wide_tables_scroll_inside_the_page_with_labelled_headers(tmp_path: Path):
    """A table wider than the page scrolls in its own box (the page itself never scrolls sideways, nothing is
    clipped); headers are labels with units and no dtype; long text wraps in a bounded column."""
    wide = pl.DataFrame({f"measure_{i}_duration_s": [float(i), 2.5 * i] for i in range(24)}).with_columns(
        pl.Series("replay_detail", ["step 3: state WIN recorded, NOT_FINISHED replayed " * 3, "ok"]),
        pl.Series("is_included", [True, False]))
    html = render_report("Wide", [Table("Wide table", wide, name="wide", labels={"is_included": "passes the bar"})],
                         None, tmp_path / "wide.html")
    text = html.read_text()
    assert "Float64" not in text and "Boolean" not in text and 'class="dtype"' not in text
    assert '>measure 3 duration <span class="unit">(s)</span></th>' in text
    assert 'data-column="is_included" title="is_included: ' in text and ">passes the bar</th>" in text
    assert text.count('<td class="wrap">') == 2  # the long text column, in every row
    assert pl.read_parquet(tmp_path / "wide.parquet").columns == wide.columns  # exports keep the names
    with open_page(html, wait_ms=100, width=900, height=700) as page:
        box = "document.querySelector('.table-wrap')"
        assert page.evaluate(f"{box}.scrollWidth > {box}.clientWidth") is True  # the table scrolls in its box
        assert page.evaluate(f"getComputedStyle({box}).overflowX") == "auto"
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth") is True
        last = "document.querySelector('table.data th:last-child')"
        assert page.evaluate(f"{last}.getBoundingClientRect().width > 0") is True
        assert page.errors == []


def test_index_groups_entries_with_headline_numbers_and_folded_files(tmp_path: Path):
    (tmp_path / "a.html").write_text("<!doctype html><title>a</title>")
    (tmp_path / "a__t.csv").write_text("x\n1\n")
    index = render_index("Index", [
        Link("Report A", tmp_path / "a.html", "What does A answer?", "Readers of A", facts=[("players", 1500)]),
        Link("a__t.csv", tmp_path / "a__t.csv", group="Readers of A", folded=True),
    ], None, tmp_path / "index.html", group_notes={"Readers of A": "Who A is for."})
    text = index.read_text()
    section = re.search(r'<section class="audience" id="readers-of-a">(.*?)</section>', text, re.S).group(1)
    assert "What does A answer?" in section and "Who A is for." in section
    assert "<dt>players</dt><dd>1,500</dd>" in section
    folded = re.search(r'<details class="files">(.*?)</details>', section, re.S).group(1)
    assert 'href="a__t.csv"' in folded and 'href="a.html"' not in folded


def test_an_index_link_to_a_file_is_never_read_as_a_url_scheme(tmp_path: Path):
    """A file in the output folder named `javascript:alert(document.domain).json` was linked as
    href="javascript:alert(document.domain).json": a click ran the script. `#` and `?` in names broke links."""
    names = ["javascript:alert(document.domain).json", "a#b?c.csv"]
    for name in names:
        (tmp_path / name).write_text("{}")
    index = render_index("Index", [Link(name, tmp_path / name, group="files", folded=True) for name in names],
                         None, tmp_path / "index.html")
    hrefs = re.findall(r'href="([^"]*)"', index.read_text())
    assert "javascript%3Aalert%28document.domain%29.json" in hrefs and "a%23b%3Fc.csv" in hrefs
    assert not any(h.lower().startswith("javascript:") for h in hrefs)


def test_a_long_label_makes_a_bounded_slug_that_stays_unique():
    """Figures are named after a scorecard's label, all its recordings' names joined: twelve ordinary names made a
    file name over 255 bytes, and `report scores` wrote nothing."""
    from pipeline.report.html import MAX_SLUG, slugify

    a = ", ".join(f"agent-run-with-a-descriptive-name-{i:02d}" for i in range(12))
    b = a.replace("11", "12")
    assert len(slugify(a)) <= MAX_SLUG and slugify(a) != slugify(b) and slugify(a).startswith("agent-run-with")
    assert slugify("Level scores") == "level-scores"  # short ones are as before
