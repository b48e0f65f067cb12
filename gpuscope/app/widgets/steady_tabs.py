"""Tab widgets of the main window: ones that lay out again only when they must, with tabs built on
first use and found by their widget (never by their title)."""

from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QEvent, QRect
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtWidgets import QStackedWidget, QStyle, QStyleOptionTabWidgetFrame, QTabWidget, QWidget


class SteadyTabs(QTabWidget):
    """A tab widget that lays itself out again only when its tab bar's or its pages' size hints
    changed. Qt asks every ancestor of a label to lay out again whenever the label's text changes
    (``QLayout::activate`` always ends in ``updateGeometry``), and a ``QTabWidget`` answers each
    request by repainting all of itself and asking its own parent: the console's line count and
    the run clock made the whole Run tab repaint several times a second."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._hints: tuple | None = None

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.LayoutRequest:
            stack, bar = self.findChild(QStackedWidget), self.tabBar()
            hints = (bar.sizeHint(), bar.minimumSizeHint(), bar.isVisibleTo(self),
                     stack.sizeHint() if stack else None, stack.minimumSizeHint() if stack else None)
            if hints == self._hints:
                return True        # nothing this widget lays out changed: no relayout, no repaint
            self._hints = hints
        return super().event(event)


class LazyTabs(SteadyTabs):
    """Steady tabs, some built on first use: ``add_lazy(title, make)`` puts a placeholder whose
    widget ``made(placeholder)`` builds (and swaps in) when asked."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._makers: dict[QWidget, Callable[[], QWidget]] = {}
        self._built: dict[QWidget, QWidget] = {}

    def add_lazy(self, title: str, make: Callable[[], QWidget]) -> QWidget:
        """A tab built on first use; returns its placeholder (the key of ``made``)."""
        placeholder = QWidget()
        self._makers[placeholder] = make
        self.addTab(placeholder, title)
        return placeholder

    def is_built(self, placeholder: QWidget) -> bool:
        return placeholder in self._built

    def made(self, placeholder: QWidget) -> QWidget:
        """The tab's widget, built and put in the placeholder's place on first access."""
        widget = self._built.get(placeholder)
        if widget is None:
            widget = self._built[placeholder] = self._makers[placeholder]()
            index, current = self.indexOf(placeholder), self.currentIndex()
            self.blockSignals(True)
            title = self.tabText(index)
            self.removeTab(index)
            self.insertTab(index, widget, title)
            self.setCurrentIndex(current)
            self.blockSignals(False)
            placeholder.hide()
        return widget

    def key_at(self, index: int) -> QWidget | None:
        """The placeholder of the lazy tab at ``index``, built or not (None for any other tab)."""
        widget = self.widget(index)
        if widget in self._makers:
            return widget
        return next((key for key, built in self._built.items() if built is widget), None)

    def lazy_at(self, index: int) -> QWidget | None:
        """The placeholder of a lazy tab not built yet at ``index`` (None for any other tab)."""
        widget = self.widget(index)
        return widget if widget in self._makers and widget not in self._built else None


def pane_color(tabs: QTabWidget) -> QColor:
    """The colour the style fills a tab widget's pane with (drawn once, the middle pixel)."""
    image = QImage(32, 32, QImage.Format.Format_ARGB32)
    image.fill(tabs.palette().window().color())
    option = QStyleOptionTabWidgetFrame()
    option.initFrom(tabs)
    option.rect = QRect(0, 0, 32, 32)
    painter = QPainter(image)
    tabs.style().drawPrimitive(QStyle.PrimitiveElement.PE_FrameTabWidget, option, painter, tabs)
    painter.end()
    return image.pixelColor(16, 16)
