"""Drawing one timeline row with QPainter: whole items, merged sub-pixel runs, labels, hatching.

Per row and frame: pick the pyramid level for the zoom, find the visible slice with two
``searchsorted`` calls, convert to pixels with numpy, fold everything narrower than a pixel into
runs (one rectangle per run of touching pixel columns), and draw the rest as bars, labelled when
wide enough. The number of rectangles is bounded by the row's width in pixels.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetrics, QPainter

from gpuscope.app import timeline_lod as L
from gpuscope.trace import timeline as T

LABEL_MIN_PX = 36      # label a bar when it is at least this wide
DENSE_ALPHA = 170      # merged runs are drawn a little lighter than single items


class RowPainter:
    """Caches colours and font metrics across rows and frames."""

    def __init__(self, font: QFont) -> None:
        self.font = font
        self.fm = QFontMetrics(font)
        self._colors: dict[int, QColor] = {}
        self._dense: dict[int, QColor] = {}
        self._hatch = QBrush(QColor(255, 255, 255, 150), Qt.BDiagPattern)
        self.rects_drawn = 0

    def color(self, argb: int) -> QColor:
        c = self._colors.get(argb)
        if c is None:
            c = QColor((argb >> 16) & 0xFF, (argb >> 8) & 0xFF, argb & 0xFF)
            self._colors[argb] = c
        return c

    def dense(self, argb: int) -> QColor:
        c = self._dense.get(argb)
        if c is None:
            c = QColor(self.color(argb))
            c.setAlpha(DENSE_ALPHA)
            self._dense[argb] = c
        return c

    @staticmethod
    def text_color(argb: int) -> QColor:
        r, g, b = (argb >> 16) & 0xFF, (argb >> 8) & 0xFF, argb & 0xFF
        return QColor(0, 0, 0) if 0.299 * r + 0.587 * g + 0.114 * b > 150 else QColor(255, 255, 255)

    def paint_row(self, p: QPainter, row: L.Row, tl: T.Timeline, t0: float, nspp: float,
                  x_off: float, y: float, h: float, width: float, hatched: bool = False) -> None:
        lv = row.level_for(nspp)
        t1 = t0 + nspp * width
        i0 = int(np.searchsorted(lv.reach, t0, side="left"))
        i1 = int(np.searchsorted(lv.start, t1, side="right"))
        if i1 <= i0:
            return
        inv = 1.0 / nspp
        x0 = np.maximum((lv.start[i0:i1] - t0) * inv, -2.0)
        x1 = np.minimum((lv.end[i0:i1] - t0) * inv, width + 2.0)
        count = lv.count[i0:i1]
        first = lv.first[i0:i1]
        whole = ((x1 - x0) >= 1.0) & (count == 1)
        self._paint_runs(p, row, x0[~whole], x1[~whole], first[~whole], x_off, y, h)
        self._paint_bars(p, row, tl, x0[whole], x1[whole], first[whole], x_off, y, h, hatched)

    def _paint_runs(self, p: QPainter, row: L.Row, x0: np.ndarray, x1: np.ndarray,
                    first: np.ndarray, x_off: float, y: float, h: float) -> None:
        """Sub-pixel items and merged blocks: one rectangle per run of touching pixels."""
        if not len(x0):
            return
        reach = np.maximum.accumulate(x1)
        heads = np.r_[0, np.flatnonzero(x0[1:] > reach[:-1] + 1.0) + 1]
        left = x0[heads]
        right = np.maximum(np.maximum.reduceat(x1, heads), left + 1.0)
        colors = row.color[first[heads]]
        for xl, xr, c in zip(left.tolist(), right.tolist(), colors.tolist()):
            p.fillRect(QRectF(x_off + xl, y, xr - xl, h), self.dense(c))
        self.rects_drawn += len(heads)

    def _paint_bars(self, p: QPainter, row: L.Row, tl: T.Timeline, x0: np.ndarray, x1: np.ndarray,
                    first: np.ndarray, x_off: float, y: float, h: float, hatched: bool) -> None:
        """Items at least a pixel wide: a bar each, with a label and hatching when wide enough."""
        if not len(x0):
            return
        colors = row.color[first].tolist()
        labelled = []
        for xl, xr, c, pos in zip(x0.tolist(), x1.tolist(), colors, first.tolist()):
            # a pixel of gap on the right keeps back-to-back ranges of one colour apart
            r = QRectF(x_off + xl, y, xr - xl - (1.0 if xr - xl >= 3 else 0.0), h)
            p.fillRect(r, self.color(c))
            if xr - xl >= 4:
                if hatched:
                    p.fillRect(r, self._hatch)
                if xr - xl >= LABEL_MIN_PX:
                    labelled.append((r, c, pos))
        self.rects_drawn += len(colors)
        if not labelled:
            return
        p.setFont(self.font)
        strings = tl.strings.values
        for r, c, pos in labelled:
            nid = int(row.name_id[pos])
            name = strings[nid] if nid >= 0 else "(unnamed)"
            left = max(r.left(), x_off) + 3
            room = r.right() - left - 3
            if room < 12:
                continue
            p.setPen(self.text_color(c))
            p.drawText(QRectF(left, r.top(), room, r.height()), Qt.AlignVCenter | Qt.AlignLeft,
                       self.fm.elidedText(name, Qt.ElideRight, int(room)))
