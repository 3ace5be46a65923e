"""A figure laid out once for its files: :func:`lay_out`, which :func:`attnlab.runner.save_figure` calls.

``Figure.savefig`` on a figure in constrained layout draws it twice: a draw with the renderer switched off, to run
the layout (and then every artist, for nothing), and the draw it writes. :func:`lay_out` runs the layout engine
alone, at the resolution the files are written at, with the renderer the first file then draws with, and leaves
the figure without an engine: each file is then one draw, and its pixels are those ``savefig`` writes.

Each Agg renderer (one per figure) brings its own mathtext parser, and matplotlib caches parsed mathtext per
parser: every figure parsed the log-axis labels (``$\\mathdefault{10^{-3}}$``), ``step $t$`` and its other math
again. :func:`lay_out` gives the renderers of a process one parser of their kind (that of the first), so that a
string another figure parsed recently is not parsed again. A parse is a function of the string, size, font,
resolution and hinting (the cache's key), so the glyphs are the same.
"""

from __future__ import annotations

import contextlib
from typing import Any

__all__ = ["lay_out"]

# The first renderer's mathtext parser per renderer class, given to the renderers that follow
_PARSERS: dict[type, Any] = {}


def lay_out(figure: Any, dpi: float) -> bool:
    """Fix the layout of ``figure`` as ``figure.savefig(..., dpi=dpi)`` would, without the draw that does it there.

    Parameters
    ----------
    figure : matplotlib.figure.Figure
        A figure with a layout engine (attnlab's are in constrained layout) is laid out and left without one (its
        axes keep the positions of this layout, and a save draws it once); another is left as it is. Its canvas
        keeps a renderer at ``dpi``, which a save at ``dpi`` draws with.
    dpi : float
        The resolution the files are written at (the layout follows the text's extents in pixels).

    Returns
    -------
    bool
        Whether ``figure`` had a layout engine (and is now laid out): without one, a save has to crop it.
    """
    engine = figure.get_layout_engine()
    original = figure.get_dpi()
    figure.set_dpi(dpi)
    try:
        renderer = figure.canvas.get_renderer() if hasattr(figure.canvas, "get_renderer") else None
        if renderer is not None and hasattr(renderer, "mathtext_parser"):
            renderer.mathtext_parser = _PARSERS.setdefault(type(renderer), renderer.mathtext_parser)
        if engine is not None and figure.axes:  # as Figure.draw, which skips a figure without axes and ignores
            with contextlib.suppress(ValueError):  # a ValueError of the engine (raised while a window resizes)
                engine.execute(figure)
    finally:
        figure.set_dpi(original)
    if engine is None:
        return False
    figure.set_layout_engine(None)
    return True
