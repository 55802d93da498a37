"""H-ARC grids: the bar-delimited grid string, and the few pure grid operations the editor needs.

A grid is a 2-D ``numpy.uint8`` array of symbols 0-9, 1 to 30 cells on each side. In H-ARC CSVs a grid
is written row by row, each row as its digits, with bars around and between rows:
``"|0800|0800|8000|"`` is 3 rows x 4 columns (harc-editor.md §0.2, formats.md §D.6).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MAX_SIDE = 30
N_SYMBOLS = 10

Grid = np.ndarray
_NOT_GRID_TEXT = str.maketrans("", "", "0123456789|")  # deletes what a grid string is made of: leaves the rest
_DIGITS = bytes(48 + b if b < N_SYMBOLS else ord("x") for b in range(256))  # symbol byte -> ASCII digit


class GridFormatError(ValueError):
    """A grid string or grid value is malformed; the message says exactly what is wrong."""


def is_grid_string(text: object) -> bool:
    """Whether ``text`` is a well-formed grid string (exactly what :func:`parse_grid` accepts), without
    building the array: such a string is its own canonical form, ``format_grid(parse_grid(text)) == text``."""
    return type(text) is str and _grid_shape(text) is not None


def _grid_shape(text: str) -> tuple[int, int] | None:
    """(height, width) of a well-formed grid string, else None. Only digits and bars; with h rows of width
    w >= 1 (w = the first row's length) every bar sits at a multiple of w + 1: the string's stride-(w + 1)
    slice is h + 1 bars and there are no other bars. C-level string operations only, no loop over the rows
    (this runs on every distinct grid of a study)."""
    width = text.find("|", 1) - 1
    height = text.count("|") - 1
    if (width < 1 or height > MAX_SIDE or width > MAX_SIDE or len(text) != height * (width + 1) + 1
            or text[0] != "|" or text.translate(_NOT_GRID_TEXT)):
        return None
    return (height, width) if text[:: width + 1].count("|") == height + 1 else None


def parse_grid(text: str) -> Grid:
    """Parse a grid string such as ``"|077|777|077|"`` into an H x W uint8 array.

    Strict: no surrounding whitespace, a bar at both ends, every row non-empty, all rows the same
    length, digits only, at most 30 x 30. Raises GridFormatError naming the first problem found.
    """
    if not isinstance(text, str):
        raise GridFormatError(f"grid string must be a str, got {type(text).__name__}")
    # fast path; anything else goes through the checks that explain it
    shape = _grid_shape(text)
    if shape is not None:
        cells = np.frombuffer(text.replace("|", "").encode("ascii"), dtype=np.uint8) - ord("0")
        return cells.reshape(shape)
    if text == "":
        raise GridFormatError("grid string is empty")
    if not text.startswith("|"):
        raise GridFormatError(f"grid string must start with '|': {_clip(text)!r}")
    if not text.endswith("|") or len(text) < 2:
        raise GridFormatError(f"grid string must end with '|': {_clip(text)!r}")
    pieces = text[1:-1].split("|")
    for index, piece in enumerate(pieces):
        if piece == "":
            raise GridFormatError(f"row {index} is empty (two adjacent bars?): {_clip(text)!r}")
    width = len(pieces[0])
    for index, piece in enumerate(pieces):
        if len(piece) != width:
            raise GridFormatError(
                f"rows have uneven lengths: row 0 has {width} cells, row {index} has {len(piece)}"
            )
        for col, char in enumerate(piece):
            if not ("0" <= char <= "9"):
                raise GridFormatError(f"cell ({index}, {col}) is {char!r}, expected a digit 0-9")
    height = len(pieces)
    _check_side("height", height)
    _check_side("width", width)
    return np.array([[ord(char) - 48 for char in piece] for piece in pieces], dtype=np.uint8)


def format_grid(grid: Grid | Sequence[Sequence[int]]) -> str:
    """Write a grid as its grid string; the inverse of :func:`parse_grid`."""
    if isinstance(grid, np.ndarray) and grid.dtype == np.uint8 and grid.ndim == 2:
        height, width = grid.shape
        if 1 <= height <= MAX_SIDE and 1 <= width <= MAX_SIDE:
            # The editor's own grids: symbols become ASCII digits in one translate; a byte outside 0-9
            # becomes a non-digit, so isdigit() is the range check.
            digits = grid.tobytes().translate(_DIGITS)
            if digits.isdigit():
                text = digits.decode("ascii")
                return "|" + "|".join([text[i:i + width] for i in range(0, height * width, width)]) + "|"
    array = as_grid(grid)  # validates (raises with a precise message) and converts
    height, width = array.shape
    text = array.tobytes().translate(_DIGITS).decode("ascii")
    return "|" + "|".join([text[i:i + width] for i in range(0, height * width, width)]) + "|"


def as_grid(value: Grid | str | Sequence[Sequence[int]]) -> Grid:
    """Return a validated uint8 copy of a grid given as a grid string, nested lists or an array."""
    if isinstance(value, str):
        return parse_grid(value)
    try:
        array = np.asarray(value)
    except ValueError as exc:  # ragged nested lists
        raise GridFormatError(f"grid rows have uneven lengths ({exc})") from exc
    if array.ndim != 2:
        raise GridFormatError(f"grid must be 2-D (rows of cells), got {array.ndim} dimension(s)")
    height, width = array.shape
    _check_side("height", height)
    _check_side("width", width)
    if array.dtype.kind not in "iu":
        raise GridFormatError(f"grid cells must be integers 0-9, got dtype {array.dtype}")
    if array.size and (array.min() < 0 or array.max() >= N_SYMBOLS):
        bad = np.argwhere((array < 0) | (array >= N_SYMBOLS))[0]
        raise GridFormatError(f"cell ({bad[0]}, {bad[1]}) is {array[bad[0], bad[1]]}, expected 0-9")
    return array.astype(np.uint8, copy=True)


def zeros(height: int, width: int) -> Grid:
    """The all-black grid Z(h, w)."""
    _check_side("height", height)
    _check_side("width", width)
    return np.zeros((height, width), dtype=np.uint8)


def grid_size(grid: Grid) -> tuple[int, int]:
    """(height, width) = (number of rows, number of columns)."""
    return int(grid.shape[0]), int(grid.shape[1])


def resized(grid: Grid, height: int, width: int) -> Grid:
    """Resize anchored at the top-left: kept cells keep their value, new cells are 0 (§3.9)."""
    result = zeros(height, width)
    keep_h = min(height, grid.shape[0])
    keep_w = min(width, grid.shape[1])
    result[:keep_h, :keep_w] = grid[:keep_h, :keep_w]
    return result


def flood_fill(grid: Grid, row: int, col: int, symbol: int) -> Grid:
    """Return a copy where the 4-connected region of (row, col)'s value is recoloured to ``symbol``.

    Neighbours are up, down, left and right only (§3.2). If the cell already has ``symbol`` the copy
    is unchanged.
    """
    result = grid.copy()
    target = int(result[row, col])
    if target == symbol:
        return result
    height, width = result.shape
    stack = [(row, col)]
    result[row, col] = symbol
    while stack:
        r, c = stack.pop()
        for nr, nc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            if 0 <= nr < height and 0 <= nc < width and result[nr, nc] == target:
                result[nr, nc] = symbol
                stack.append((nr, nc))
    return result


def _check_side(name: str, value: int) -> None:
    if not 1 <= value <= MAX_SIDE:
        raise GridFormatError(f"grid {name} {value} is outside 1-{MAX_SIDE}")


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
