"""arcstudy's pipeline: ingest, transforms, scoring, simulation, reports and the `arcstudy` CLI."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("arcstudy")
except PackageNotFoundError:  # running from a checkout that was not installed
    __version__ = "0.0.0+unknown"
