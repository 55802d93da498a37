"""The `arcstudy` command line: this module only assembles the app, one command per module of
pipeline/commands/ (where each verb says in --help what it reads and writes). Console script:
`arcstudy = pipeline.cli:app`; `python -m pipeline.cli` runs the same app.

Exit codes (pipeline/commands/common.py): 0 ok, 1 error, 2 usage, 3 completed with rejected input, 130 interrupted.
"""

from __future__ import annotations

from typing import Annotated

import typer

import pipeline
from pipeline.commands import (
    build,
    demo,
    explore,
    harc,
    ingest,
    qualify,
    query,
    replay,
    report,
    schema,
    score,
    simulate,
    tables,
    view,
)
from pipeline.commands.common import EXIT_OK, Command, Group
from pipeline.core.console import out

app = typer.Typer(
    name="arcstudy",
    cls=Group,
    help="Trustworthy numbers from ARC human studies and agent runs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"arcstudy {pipeline.__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def main(
    version: Annotated[bool, typer.Option("--version", callback=_version_callback, is_eager=True,
                                          help="Print the version and exit.")] = False,
    plain: Annotated[bool, typer.Option("--plain", help="No colours or live progress bars (automatic in CI "
                                        "and when output is not a terminal).")] = False,
) -> None:
    out.set_plain(plain)


# In the order `arcstudy --help` lists them: the order a user meets them.
app.command("tables", cls=Command)(tables.tables_command)
app.command("schema", cls=Command)(schema.schema_command)
app.command("query", cls=Command)(query.query_command)
app.command("ingest", cls=Command)(ingest.ingest_command)
app.command("formats", cls=Command)(ingest.formats_command)
app.command("build", cls=Command)(build.build_command)
app.command("baselines", cls=Command)(build.baselines_command)
app.command("score", cls=Command)(score.score_command)
app.command("replay-harc", cls=Command)(harc.replay_harc_command)
app.command("harc-analyses", cls=Command)(harc.harc_analyses_command)
app.command("harc-graph", cls=Command)(harc.harc_graph_command)
app.command("view", cls=Command)(view.view_command)
app.command("replay", cls=Command)(replay.replay_command)
app.command("simulate", cls=Command)(simulate.simulate_command)
app.command("demo", cls=Command)(demo.demo_command)
app.command("report", cls=Command)(report.report_command)
app.command("explore", cls=Command)(explore.explore_command)
app.command("qualify", cls=Command)(qualify.qualify_command)


if __name__ == "__main__":  # pragma: no cover
    app()
