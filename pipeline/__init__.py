"""arcstudy's pipeline: ingest, transforms, scoring, simulation, reports and the `arcstudy` CLI."""

from typing import Any


def __getattr__(name: str) -> Any:
    # `__version__` is looked up on first use: importlib.metadata costs ~0.15 s at import, paid otherwise by every
    # process that imports any part of the pipeline (each sandbox child among them)
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            value = version("arcstudy")
        except PackageNotFoundError:  # running from a checkout that was not installed
            value = "0.0.0+unknown"
        globals()["__version__"] = value
        return value
    raise AttributeError(f"module 'pipeline' has no attribute {name!r}")
