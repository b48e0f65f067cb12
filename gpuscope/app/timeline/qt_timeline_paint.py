"""Drawing one timeline row with QPainter: whole items, merged sub-pixel runs, labels, hatching.

Per row and frame: pick the pyramid level for the zoom, find the visible slice with two
``searchsorted`` calls, convert to pixels with numpy, fold everything narrower than a pixel into
runs (one span per run of touching pixel columns), and write all spans into one pixel line with
numpy; the line is drawn stretched to the row's height with one ``drawImage``. Only hatching and
labels (bars wide enough for them, so few) are drawn one by one. The cost of a row is bounded by
its width in pixels, not by the number of ranges.
"""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetrics, QImage, QPainter, QPainterPath, QPen, QPolygonF

from gpuscope.views import timeline_lod as L
from gpuscope.views import timeline_text as TT
from gpuscope.trace import timeline as T

GUTTER = 200       # px of lane labels on the left
AXIS_H = 24        # px of the time axis on top
_LEFT_MIDDLE = Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft
LABEL_MIN_PX = 36      # label a bar when it is at least this wide
DENSE_ALPHA = 170      # merged runs are drawn a little lighter than single items
BACKGROUND = 250       # grey level of the rows' background (QtTimeline paints it)


class RowPainter:
    """Caches colours and font metrics across rows and frames."""

    def __init__(self, font: QFont) -> None:
        self.font = font
        self.fm = QFontMetrics(font)
        self._colors: dict[int, QColor] = {}
        self._dense: dict[int, QColor] = {}
        self._hatch = QBrush(QColor(255, 255, 255, 150), Qt.BrushStyle.BDiagPattern)
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
        # int64 keys: a float key would make numpy convert the whole column on every call
        i0 = int(np.searchsorted(lv.reach, np.int64(math.floor(t0)), side="left"))
        i1 = int(np.searchsorted(lv.start, np.int64(math.ceil(t1)), side="right"))
        if i1 <= i0:
            return
        inv = 1.0 / nspp
        x0 = np.maximum((lv.start[i0:i1] - t0) * inv, -2.0)
        x1 = np.minimum((lv.end[i0:i1] - t0) * inv, width + 2.0)
        first = lv.first[i0:i1]
        whole = ((x1 - x0) >= 1.0) & (lv.count[i0:i1] == 1)
        line = np.zeros(int(width), dtype=np.uint32)      # one pixel line, transparent
        part = ~whole
        self._fill_runs(line, x0[part], x1[part], lv.cmin[i0:i1][part], lv.cmax[i0:i1][part])
        self._fill_bars(line, row, x0[whole], x1[whole], first[whole])
        img = QImage(line.data, len(line), 1, len(line) * 4, QImage.Format.Format_ARGB32_Premultiplied)
        p.drawImage(QRectF(x_off, y, len(line), h), img)
        self._decorate(p, row, tl, x0[whole], x1[whole], first[whole], x_off, y, h, hatched)

    def paint_marks(self, p: QPainter, lane: L.Lane, tl: T.Timeline, t0: float, nspp: float,
                    x_off: float, y: float, width: float, size: float = 7.0) -> None:
        """NVTX marks as small downward triangles, at most one per pixel column."""
        if lane.marks is None or lane.mark_ref is None:
            return
        t1 = t0 + nspp * width
        i0 = int(np.searchsorted(lane.marks, np.int64(math.floor(t0))))
        i1 = int(np.searchsorted(lane.marks, np.int64(math.ceil(t1)), side="right"))
        if i1 <= i0:
            return
        x = np.floor((lane.marks[i0:i1] - t0) / nspp).astype(np.int64)
        keep = np.r_[True, x[1:] != x[:-1]]
        colors = tl.marks.color[lane.mark_ref[i0:i1][keep]]
        p.setPen(QColor(40, 40, 40))
        for xi, c in zip(x[keep].tolist(), colors.tolist()):
            p.setBrush(self.color(int(c)) if c else QColor(40, 40, 40))
            cx = x_off + xi + 0.5
            p.drawPolygon(QPolygonF([QPointF(cx - size / 2, y), QPointF(cx + size / 2, y),
                                     QPointF(cx, y + size)]))

    def _fill_runs(self, line: np.ndarray, x0: np.ndarray, x1: np.ndarray, cmin: np.ndarray,
                   cmax: np.ndarray) -> None:
        """Sub-pixel items and merged blocks: one span per run of touching pixels, a lighter shade
        of their colour when they share one, else grey."""
        if not len(x0):
            return
        reach = np.maximum.accumulate(x1)
        heads = np.r_[0, np.flatnonzero(x0[1:] > reach[:-1] + 1.0) + 1]
        left = np.floor(x0[heads])
        right = np.maximum(np.ceil(np.maximum.reduceat(x1, heads)), left + 1)
        lo, hi = np.minimum.reduceat(cmin, heads), np.maximum.reduceat(cmax, heads)
        _fill(line, left, right, _dense(np.where(lo == hi, lo, np.uint32(L.MIXED_COLOR))))
        self.rects_drawn += len(heads)

    def _fill_bars(self, line: np.ndarray, row: L.Row, x0: np.ndarray, x1: np.ndarray,
                   first: np.ndarray) -> None:
        """Items at least a pixel wide; a pixel of gap on the right keeps neighbours of one colour apart."""
        if not len(x0):
            return
        left = np.round(x0)
        right = np.maximum(np.round(x1) - ((x1 - x0) >= 3), left + 1)
        _fill(line, left, right, row.color[first] | np.uint32(0xFF000000))
        self.rects_drawn += len(x0)

    def _decorate(self, p: QPainter, row: L.Row, tl: T.Timeline, x0: np.ndarray, x1: np.ndarray,
                  first: np.ndarray, x_off: float, y: float, h: float, hatched: bool) -> None:
        """Hatching (gpuscope's own ranges next to nsys's) and labels, on bars wide enough."""
        wide = (x1 - x0) >= (4 if hatched else LABEL_MIN_PX)
        if not wide.any():
            return
        p.setFont(self.font)
        strings = tl.strings.values
        for xl, xr, pos in zip(x0[wide].tolist(), x1[wide].tolist(), first[wide].tolist()):
            r = QRectF(x_off + round(xl), y, round(xr) - round(xl) - 1, h)
            if hatched:
                p.fillRect(r, self._hatch)
            if xr - xl < LABEL_MIN_PX:
                continue
            left = max(r.left(), x_off) + 3
            room = r.right() - left - 2
            if room < 12:
                continue
            label = row.label(pos, strings)
            p.setPen(self.text_color(int(row.color[pos])))
            p.drawText(QRectF(left, r.top(), room, r.height()), _LEFT_MIDDLE,
                       self.fm.elidedText(label, Qt.TextElideMode.ElideRight, int(room)))


def _dense(argb: np.ndarray) -> np.ndarray:
    """Colours of merged runs: blended towards the background, opaque."""
    c = argb.astype(np.uint32)
    out = np.full(len(c), 0xFF000000, dtype=np.uint32)
    a = DENSE_ALPHA / 255.0
    for shift in (16, 8, 0):
        ch = (c >> shift) & 0xFF
        out |= (np.round(ch * a + BACKGROUND * (1 - a)).astype(np.uint32) & 0xFF) << shift
    return out


def _fill(line: np.ndarray, left: np.ndarray, right: np.ndarray, colors: np.ndarray) -> None:
    """Paint the pixel spans [left, right) of ``line`` (later spans win where they overlap)."""
    n = len(line)
    a = np.clip(left, 0, n).astype(np.int64)
    b = np.clip(right, 0, n).astype(np.int64)
    lengths = np.maximum(b - a, 0)
    total = int(lengths.sum())
    if total == 0:
        return
    starts = np.repeat(a - (np.cumsum(lengths) - lengths), lengths)
    line[np.arange(total) + starts] = np.repeat(colors.astype(np.uint32), lengths)


# --------------------------------------------------------------------------- gutter and axis

def paint_gutter(view, p: QPainter, slots: list) -> None:  # view: QtTimeline
    """Process headers and lane labels (with a gpuscope badge) left of the rows."""
    p.fillRect(QRectF(0, AXIS_H, GUTTER, view.height()), QColor(240, 241, 244))
    p.setPen(QColor(200, 200, 205))
    p.drawLine(GUTTER - 1, AXIS_H, GUTTER - 1, view.height())
    bold = QFont(view.font())
    bold.setBold(True)
    fm_bold, fm = QFontMetrics(bold), QFontMetrics(view.font())
    mixed = view.layout_model.mixed_sources if view.layout_model else False
    for s in slots:
        y = AXIS_H + s.y - view.scroll_y
        if s.row is None:
            p.setFont(bold)
            p.setPen(QColor(30, 40, 60))
            text = fm_bold.elidedText(s.block.label, Qt.TextElideMode.ElideRight, GUTTER - 8)
            p.drawText(QRectF(4, y, GUTTER - 8, s.h), _LEFT_MIDDLE, text)
            # the whole name in the process's band (the gutter may have cut it)
            band = f"{s.block.full_name or s.block.label} (pid {s.block.pid})"
            if s.block.pid == L.GPUS_PID or (view.layout_model is not None
                                             and s.block.pid in view.layout_model.timeline.groups):
                band = s.block.full_name or s.block.label     # a job's merged pid means nothing to the user
            if not s.block.lanes:
                band += ": no ranges recorded for this process"
            p.setFont(view.font())
            p.setPen(QColor(110, 115, 125))
            p.drawText(QRectF(GUTTER + 6, y, view.plot_width() - 12, s.h), _LEFT_MIDDLE,
                       fm.elidedText(band, Qt.TextElideMode.ElideRight, view.plot_width() - 12))
            continue
        if s.depth != 0 or s.lane is None:
            continue
        p.setFont(view.font())
        badge = mixed and s.lane.source == T.SOURCE_GPUSCOPE and s.lane.kind == L.KIND_NVTX
        label = s.lane.label
        room = GUTTER - 16 - (62 if badge else 0)
        p.setPen(QColor(60, 60, 70))
        p.drawText(QRectF(12, y, room, s.h), _LEFT_MIDDLE,
                   fm.elidedText(label, Qt.TextElideMode.ElideRight, room))
        if badge:
            _badge(p, GUTTER - 66, y + 2, s.h - 4, "gpuscope")


def _badge(p: QPainter, x: float, y: float, h: float, text: str) -> None:
    r = QRectF(x, y, 60, h)
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(QColor(255, 214, 102))
    p.drawRoundedRect(r, 3, 3)
    p.setPen(QColor(90, 60, 0))
    p.drawText(r, Qt.AlignmentFlag.AlignCenter, text)


def paint_axis(view, p: QPainter) -> None:  # view: QtTimeline
    """The time axis on top: 1-2-5 ticks about 110 px apart, labels that fit."""
    w = view.width()
    p.fillRect(QRectF(0, 0, w, AXIS_H), QColor(228, 230, 235))
    t0, t1 = view.view_range()
    step = TT.nice_step(view.ns_per_px * 110)
    first = np.ceil(t0 / step) * step
    p.setPen(QColor(80, 80, 90))
    t = first
    while t <= t1:
        x = GUTTER + (t - t0) / view.ns_per_px
        p.drawLine(QPointF(x, AXIS_H - 6), QPointF(x, AXIS_H))
        label = TT.tick_label(t, step)
        if x + 3 + p.fontMetrics().horizontalAdvance(label) < w:
            p.drawText(QRectF(x + 3, 0, 120, AXIS_H - 4), _LEFT_MIDDLE, label)
        t += step
    p.drawText(QRectF(4, 0, GUTTER - 8, AXIS_H), _LEFT_MIDDLE,
               f"view {TT.fmt_ns(t1 - t0)}")


# --------------------------------------------------------------------------- focus, highlight, measure

FOCUS_COLOR = QColor(30, 110, 230)
DIM = QColor(250, 250, 250, 170)          # laid over the rows while a name is highlighted
MEASURE_FILL = QColor(30, 110, 230, 40)
MEASURE_EDGE = QColor(30, 110, 230)
MEASURE_ROWS = 6                          # names listed in the box on the timeline (all in sigMeasured)


def paint_focus(view, p: QPainter) -> None:  # view: QtTimeline
    """A 2 px outline around the widget while it has keyboard focus (Tab reaches it)."""
    p.setPen(QPen(FOCUS_COLOR, 2))
    p.setBrush(Qt.BrushStyle.NoBrush)
    p.drawRect(QRectF(1, 1, view.width() - 2, view.height() - 2))


def paint_highlight(view, p: QPainter, slots: list, hl_rows: dict, t0: float) -> None:
    """Highlighted items (a summary row's name): everything else dimmed, the highlighted items drawn
    again in their colour with a dark outline. Items closer than a pixel share one outline, so a
    frame draws at most a rectangle per pixel column and row."""
    w = view.plot_width()
    nspp = view.ns_per_px
    for s in slots:
        if s.row is None:
            continue
        y = AXIS_H + s.y - view.scroll_y
        p.fillRect(QRectF(GUTTER, y, w, s.h), DIM)
        pos = hl_rows.get(id(s.row))
        if pos is None or not len(pos):
            continue
        lv = s.row.levels[0]
        start, end = lv.start[pos], lv.end[pos]
        reach = np.maximum.accumulate(end)
        i0 = int(np.searchsorted(reach, np.int64(math.floor(t0))))
        i1 = int(np.searchsorted(start, np.int64(math.ceil(t0 + nspp * w)), side="right"))
        if i1 <= i0:
            continue
        x0 = np.maximum((start[i0:i1] - t0) / nspp, -2.0)
        x1 = np.minimum((end[i0:i1] - t0) / nspp, w + 2.0)
        run_reach = np.maximum.accumulate(x1)
        heads = np.r_[0, np.flatnonzero(x0[1:] > run_reach[:-1] + 1.0) + 1]
        left = np.floor(x0[heads])
        right = np.maximum(np.ceil(np.maximum.reduceat(x1, heads)), left + 2)
        first = pos[i0:i1][heads]
        single = np.diff(np.r_[heads, i1 - i0]) == 1
        outline = QPen(QColor(20, 20, 20), 2)
        strings = view.timeline.strings.values
        for xl, xr, at, one in zip(left.tolist(), right.tolist(), first.tolist(), single.tolist()):
            c = int(s.row.color[at])
            r = QRectF(GUTTER + xl, y + 1, xr - xl, s.h - 2)
            p.setPen(outline)
            p.setBrush(QColor((c >> 16) & 0xFF, (c >> 8) & 0xFF, c & 0xFF))
            p.drawRect(r)
            if one and xr - xl >= LABEL_MIN_PX:
                left_x = max(r.left(), GUTTER) + 4
                room = min(r.right(), GUTTER + w) - left_x - 3
                if room >= 12:
                    p.setPen(RowPainter.text_color(c))
                    text = p.fontMetrics().elidedText(s.row.label(at, strings), Qt.TextElideMode.ElideRight, int(room))
                    p.drawText(QRectF(left_x, r.top(), room, r.height()), _LEFT_MIDDLE, text)


def paint_measure(view, p: QPainter, m) -> None:  # m: timeline_query.Measure
    """The measured span: a band over the rows, a bracket on the axis with its duration, and a box
    with the names that take the most time inside it."""
    t0, _ = view.view_range()
    nspp = view.ns_per_px
    xa = GUTTER + (m.t0 - t0) / nspp
    xb = GUTTER + (m.t1 - t0) / nspp
    right_edge = GUTTER + view.plot_width()
    ca, cb = max(xa, GUTTER), min(max(xb, xa + 1), right_edge)
    p.save()
    p.setClipRect(QRectF(GUTTER, 0, view.plot_width(), view.height()))
    if cb > ca:
        p.fillRect(QRectF(ca, 0, cb - ca, view.height()), MEASURE_FILL)
    p.setPen(QPen(MEASURE_EDGE, 1))
    for x in (xa, xb):
        p.drawLine(QPointF(x, 0), QPointF(x, view.height()))
    label = TT.fmt_ns(m.duration_ns)
    fm = p.fontMetrics()
    tw = fm.horizontalAdvance(label) + 12
    mid = (ca + cb) / 2
    box = QRectF(min(max(mid - tw / 2, GUTTER + 2), right_edge - tw - 2), 2, tw, AXIS_H - 4)
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(MEASURE_EDGE)
    p.drawRoundedRect(box, 3, 3)
    p.setPen(QColor(255, 255, 255))
    p.drawText(box, Qt.AlignmentFlag.AlignCenter, label)
    p.restore()
    _measure_box(view, p, m, ca, cb, right_edge)


def _measure_box(view, p: QPainter, m, ca: float, cb: float, right_edge: float) -> None:
    """Per name: count and time inside the span, the first MEASURE_ROWS names by time inside."""
    p.setFont(view.font())
    fm = QFontMetrics(view.font())
    bold = QFont(view.font())
    bold.setBold(True)
    head = f"{TT.fmt_ns(m.duration_ns)} measured"
    lines = [(head, "", "")]
    for r in m.rows[:MEASURE_ROWS]:
        lines.append((r.name, f"{r.count:,}×", TT.fmt_ns(r.inside_ns)))
    if len(m.rows) > MEASURE_ROWS:
        lines.append((f"… {len(m.rows) - MEASURE_ROWS} more names", "", ""))
    if not m.rows:
        lines.append(("no ranges in this span", "", ""))
    name_w = min(260, max(fm.horizontalAdvance(a) + 2 for a, b, _ in lines if b) if len(lines) > 1 and any(
        b for _, b, _ in lines) else 0)
    cnt_w = max(fm.horizontalAdvance(b) for _, b, _ in lines)
    dur_w = max(fm.horizontalAdvance(c) for _, _, c in lines)
    lh = fm.height() + 2
    wide = max(fm.horizontalAdvance(a) for a, b, _ in lines if not b)
    bw = max(name_w + cnt_w + dur_w + 32, QFontMetrics(bold).horizontalAdvance(head) + 20, wide + 20)
    bh = lh * len(lines) + 8
    x = cb + 8 if cb + 8 + bw <= right_edge else max(GUTTER + 4, ca - 8 - bw)
    box = QRectF(x, AXIS_H + 6, bw, bh)
    p.setPen(QPen(MEASURE_EDGE, 1))
    p.setBrush(QColor(255, 255, 255, 235))
    p.drawRoundedRect(box, 4, 4)
    p.setPen(QColor(30, 30, 40))
    for k, (a, b, c) in enumerate(lines):
        y = box.top() + 4 + k * lh
        if k == 0:
            p.setFont(bold)
        p.drawText(QRectF(box.left() + 8, y, name_w if b else bw - 16, lh), _LEFT_MIDDLE,
                   fm.elidedText(a, Qt.TextElideMode.ElideRight, int(name_w if b else bw - 16)))
        if k == 0:
            p.setFont(view.font())
        right = Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight
        p.drawText(QRectF(box.left() + 16 + name_w, y, cnt_w, lh), right, b)
        p.drawText(QRectF(box.left() + 24 + name_w + cnt_w, y, dur_w, lh), right, c)


FLOW_COLOR = QColor(70, 70, 90, 190)


def paint_flows(view, p: QPainter, index: np.ndarray) -> None:
    """Pool flows: a curve from the job's submission (parent thread) to the task's start in the
    worker, with an arrowhead at the worker."""
    if not len(index):
        return
    fl = view.flows
    t0, _ = view.view_range()
    nspp = view.ns_per_px
    p.save()
    p.setRenderHint(QPainter.RenderHint.Antialiasing, True)
    pen = QPen(FLOW_COLOR, 1.2)
    p.setPen(pen)
    for k in index.tolist():
        ya = view.flow_y(int(fl.src_pid[k]), int(fl.src_tid[k]))
        yb = view.flow_y(int(fl.dst_pid[k]), int(fl.dst_tid[k]))
        if ya is None or yb is None:
            continue
        xa = GUTTER + (int(fl.src_ns[k]) - t0) / nspp
        xb = GUTTER + (int(fl.dst_ns[k]) - t0) / nspp
        path = QPainterPath(QPointF(xa, ya))
        bend = max(20.0, min(120.0, abs(xb - xa) / 2))
        path.cubicTo(QPointF(xa + bend, ya), QPointF(xb - bend, yb), QPointF(xb, yb))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawPath(path)
        p.setBrush(FLOW_COLOR)
        p.drawPolygon(QPolygonF([QPointF(xb, yb), QPointF(xb - 7, yb - 4), QPointF(xb - 7, yb + 4)]))
        p.drawEllipse(QPointF(xa, ya), 2.5, 2.5)
    p.restore()
