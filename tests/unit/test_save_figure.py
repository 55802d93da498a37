"""save_figure writes the spec, the SVG and a PNG rasterised from that SVG: the PNG must be the very bytes
vl-convert renders from the spec directly (text, facets and legends included)."""

from __future__ import annotations

import json

import polars as pl
import pytest
import vl_convert as vlc

from pipeline.core.figures import alt, save_figure


def _faceted_chart():
    df = pl.DataFrame({"game": ["ab12", "ab12", "cd34", "cd34"], "level": [1, 2, 1, 2],
                       "actions": [10.0, 25.5, 7.0, 40.0], "kind": ["a", "b", "a", "b"]})
    return alt.Chart(df).mark_line(point=True).encode(
        x=alt.X("level:O", title="level"), y=alt.Y("actions:Q", title="baseline actions"),
        color="kind:N", tooltip=["game:N", "actions:Q"],
    ).properties(width=120, height=90).facet(facet=alt.Facet("game:N"), columns=2).properties(title="A title")


@pytest.mark.parametrize("scale", [1.0, 2.0])
def test_png_is_what_vl_convert_renders_from_the_spec(tmp_path, scale):
    paths = save_figure(_faceted_chart(), tmp_path, "chart", png_scale=scale)
    spec_json = paths["json"].read_text()
    assert json.loads(spec_json)["title"] == "A title"
    assert paths["svg"].read_text() == vlc.vegalite_to_svg(spec_json.rstrip("\n"))
    assert paths["png"].read_bytes() == vlc.vegalite_to_png(spec_json.rstrip("\n"), scale=scale)


def test_figure_name_must_be_a_plain_stem(tmp_path):
    with pytest.raises(ValueError):
        save_figure(_faceted_chart(), tmp_path, "../escape")
