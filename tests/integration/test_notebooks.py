"""The researcher notebooks (notebooks/*.ipynb) run top to bottom against a demo-like database, so they never rot.

Each notebook reads the database path from $ARCSTUDY_DB (default reports/demo/demo.duckdb) and checks its own
results against the stored tables with asserts (recomputed baselines, re-scored runs, k-attempt accuracy), so a
notebook that runs is a notebook whose numbers agree with the pipeline. Notebooks are stored without outputs.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NAMES = ("01_querying_traces.ipynb", "02_recomputing_baselines.ipynb", "03_rescoring_an_agent.ipynb",
         "04_harc_analyses.ipynb", "05_transitions.ipynb")


def test_the_notebooks_are_there_without_outputs():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(NAMES)
    for name in NAMES:
        nb = nbformat.read(NOTEBOOKS / name, as_version=4)
        nbformat.validate(nb)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code and all(c.outputs == [] and c.execution_count is None for c in code), f"{name} has outputs"
        assert "ARCSTUDY_DB" in code[0].source  # every notebook takes its database from the environment


@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_against_a_demo_like_database(name: str, report_db, monkeypatch):
    monkeypatch.setenv("ARCSTUDY_DB", str(report_db.db))
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(nb, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()  # raises on any failing cell
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code)
    assert str(report_db.db) in "".join(o.get("text", "") for o in code[0].outputs)  # it used our database
