"""H-ARC analyses: trace checks (replay through engine.harc), visited-state graphs and the H-ARC paper's
analyses as out_harc__* tables and figures. One module per concern, pure functions over polars frames;
`build` reads the database and writes the tables; `cli` registers `replay-harc`, `harc-analyses` and
`harc-graph` on the `arcstudy` command."""
