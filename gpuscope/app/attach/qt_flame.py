"""A flame graph (icicle: callers on top) of a profile's samples, laid out by
:func:`gpuscope.views.attach_flame.layout`; hover a box for its function, file and share."""

from __future__ import annotations

import zlib

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QToolTip, QWidget

from gpuscope.views.attach_flame import Box, box_at, depth_of

ROW_PX = 18
MIN_BOX_PX = 1.0          # narrower boxes are not drawn
TEXT_MIN_PX = 28          # boxes narrower than this get no text


def box_color(box: Box) -> QColor:
    """Warm colours, the same function the same colour; the top row (a process or role) grey."""
    if box.depth == 0:
        return QColor("#d0d4da")
    h = zlib.crc32(box.name.encode()) % 1000 / 1000.0
    return QColor.fromHsvF(0.02 + 0.12 * h, 0.55 + 0.25 * h, 0.98)


class QtFlame(QWidget):
    """Draws ``boxes``; ``set_boxes(boxes, total)``."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.boxes: list[Box] = []
        self.total = 0
        self.setMouseTracking(True)
        self.setMinimumHeight(ROW_PX * 4)

    def set_boxes(self, boxes: list[Box], total: int) -> None:
        self.boxes, self.total = boxes, total
        self.updateGeometry()
        self.update()

    def sizeHint(self) -> QSize:
        return QSize(600, max(4, depth_of(self.boxes)) * ROW_PX + 2)

    def minimumSizeHint(self) -> QSize:
        return QSize(200, max(4, depth_of(self.boxes)) * ROW_PX + 2)

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.fillRect(self.rect(), QColor("white"))
        width = max(1, self.width())
        if not self.boxes:
            p.setPen(QColor("#777"))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "no profile yet: press “Profile 5 s”")
            return
        border = QPen(QColor("white"))
        for b in self.boxes:
            w = b.width * width
            if w < MIN_BOX_PX:
                continue
            rect = QRectF(b.x * width, b.depth * ROW_PX, w, ROW_PX - 1)
            p.fillRect(rect, box_color(b))
            p.setPen(border)
            p.drawRect(rect)
            if w >= TEXT_MIN_PX:
                p.setPen(QColor("#222"))
                text = p.fontMetrics().elidedText(b.name, Qt.TextElideMode.ElideRight, int(w) - 6)
                p.drawText(rect.adjusted(3, 0, -3, 0), Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                           text)

    def box_at_pos(self, x: float, y: float) -> Box | None:
        return box_at(self.boxes, x / max(1, self.width()), int(y // ROW_PX))

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        pos = event.position()
        b = self.box_at_pos(pos.x(), pos.y())
        if b is None:
            QToolTip.hideText()
            return
        where = f"\n{b.file}:{b.line}" if b.file else ""
        QToolTip.showText(event.globalPosition().toPoint(),
                          f"{b.name}{where}\n{b.samples:,} samples ({100 * b.samples / max(1, self.total):.1f} %)"
                          f" · {b.top}", self)
