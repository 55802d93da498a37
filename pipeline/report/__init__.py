"""Reports: figures (altair, saved as PNG, SVG and the Vega-Lite JSON spec) and HTML reports."""
