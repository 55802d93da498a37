"""The `arcstudy` verbs, the top layer: one module per verb (or small family of verbs), shared options and
errors in common.py. A verb parses its options, calls the layers below and prints what they did; the work
itself lives in those layers. pipeline/cli.py only assembles the app from these modules.

Modules here import heavy libraries (duckdb, altair, the engine) inside the command bodies so that
`arcstudy --help` stays fast.
"""
