"""The Help menu: keyboard shortcuts, the start-method rule, the docs, About.

The shortcuts dialog lists what the window defines *now*, read from the live widgets, so the list
cannot go stale:

- every ``QAction`` and ``QShortcut`` under the window that has a key (menus, context actions
  added to a widget with ``addAction``);
- the ``KEY_HELP`` class attribute of every widget in the window that handles keys itself in
  ``keyPressEvent`` (the timeline, the console's find box): a tuple of ``(keys, what it does)``
  rows, written next to the ``keyPressEvent`` it describes, with ``KEY_HELP_AREA`` naming where.

Tabs built on first use (Report) are built before the list is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, cast

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QAction, QDesktopServices, QKeySequence, QShortcut
from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QHeaderView, QMainWindow, QMenu, QMessageBox, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

import gpuscope

# gpuscope's start-method rule in two lines (the launch panel's hints, gpuscope.spec.START_METHOD_HELP,
# say the same per method)
START_METHOD_RULE = (
    "fork: children are copies of the parent, the fastest start, but unsafe when the parent already "
    "runs threads or has initialised CUDA (a copied lock may never be released; CUDA cannot be forked).",
    "spawn / forkserver: children start from a clean interpreter (forkserver: from a clean server "
    "process), safe with threads and CUDA, but the script needs an  if __name__ == \"__main__\":  guard.",
)
START_METHOD_MORE = ("gpuscope's start method is the default of multiprocessing in every process of the run; "
                     "a method the script chooses itself (set_start_method, get_context) wins.")


def project_url() -> str | None:
    """pyproject's ``[project.urls] Homepage``, from the installed package's metadata."""
    from importlib import metadata

    try:
        urls = metadata.metadata("gpuscope").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        return None
    for entry in urls:
        name, _, url = entry.partition(",")
        if name.strip().lower() == "homepage" and url.strip():
            return url.strip().rstrip("/")
    return None


@dataclass(frozen=True)
class Shortcut:
    """A keyboard shortcut as the help lists it."""

    keys: str      # as the platform writes it ("Ctrl+R")
    what: str      # what it does
    where: str     # the menu or the view it works in


def _menu_titles(window: QMainWindow) -> dict[int, str]:
    """id(action) → the title of the menu bar menu that holds it."""
    titles: dict[int, str] = {}

    def walk(menu: QMenu, title: str) -> None:
        for action in menu.actions():
            titles[id(action)] = title
            sub = action.menu()
            if isinstance(sub, QMenu):
                walk(sub, title)

    for top in window.menuBar().actions():
        menu = top.menu()
        if isinstance(menu, QMenu):
            walk(menu, top.text().replace("&", "") + " menu")
    return titles


def _area(widget: QWidget | None) -> str:
    while widget is not None:
        area = getattr(type(widget), "KEY_HELP_AREA", None)
        if area:
            return area
        widget = widget.parentWidget()
    return "window"


def collect_shortcuts(window: QMainWindow) -> list[Shortcut]:
    """Every key the window answers to now: actions, shortcuts, widgets' own ``KEY_HELP``."""
    for name in ("report_view",):            # tabs built on first use: build them to read them
        getattr(window, name, None)
    menus = _menu_titles(window)
    rows: list[Shortcut] = []
    seen: set[tuple[str, str]] = set()

    def add(keys: str, what: str, where: str) -> None:
        if keys and (keys, what) not in seen:
            seen.add((keys, what))
            rows.append(Shortcut(keys, what, where))

    for action in window.findChildren(QAction):
        native = QKeySequence.SequenceFormat.NativeText
        keys = ", ".join(s.toString(native) for s in action.shortcuts() if not s.isEmpty())
        what = action.text().replace("&", "").rstrip("…").strip() or action.toolTip()
        parent = action.parent()
        add(keys, what, menus.get(id(action)) or _area(parent if isinstance(parent, QWidget) else None))
    for sc in window.findChildren(QShortcut):
        parent = sc.parent()
        add(sc.key().toString(QKeySequence.SequenceFormat.NativeText), sc.whatsThis() or sc.objectName(),
            _area(parent if isinstance(parent, QWidget) else None))
    done: set[type] = set()
    for widget in window.findChildren(QWidget):
        cls = type(widget)
        table = getattr(cls, "KEY_HELP", None)
        if table and cls not in done:
            done.add(cls)
            for keys, what in table:
                add(keys, what, getattr(cls, "KEY_HELP_AREA", cls.__name__))
    return rows


class HelpMenu(NamedTuple):
    """The Help menu and its actions (the window keeps them by these names)."""

    menu: QMenu
    keys_action: QAction
    methods_action: QAction
    about_action: QAction


class ShortcutsDialog(QDialog):
    """Help → Keyboard shortcuts: a table of the keys :func:`collect_shortcuts` found."""

    def __init__(self, rows: list[Shortcut], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("gpuscope: keyboard shortcuts")
        self.rows = rows
        self.table = QTableWidget(len(self.rows), 3)
        self.table.setHorizontalHeaderLabels(["Keys", "Does", "Where"])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QTableWidget.SelectionMode.NoSelection)
        self.table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)
        for r, row in enumerate(self.rows):
            for c, text in enumerate((row.keys, row.what, row.where)):
                self.table.setItem(r, c, QTableWidgetItem(text))
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(self.table)
        lay.addWidget(buttons)
        self.resize(620, 480)


def docs_folder() -> Path | None:
    """The docs next to the installed package (a source checkout), or None (then the project site)."""
    root = Path(gpuscope.__file__).resolve().parent.parent
    return root if (root / "docs").is_dir() and (root / "README.md").is_file() else None


def doc_links() -> list[tuple[str, QUrl]]:
    """(title, url) of the README and every docs/*.md: local files when present, else the site."""
    root = docs_folder()
    if root is not None:
        files = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
        return [(f.stem if f.name != "README.md" else "README (overview)", QUrl.fromLocalFile(str(f)))
                for f in files]
    site = project_url()
    if site is None:
        return []
    names = ["README.md"] + [f"docs/{n}.md" for n in ("APP", "FINDINGS", "TIMELINE-VIEW", "COMPARE", "CLEANUP",
                                                       "RUN-ENGINE", "NSYS-RECORDING", "MULTINODE", "RAY")]
    return [(Path(n).stem, QUrl(f"{site}/{n}")) for n in names]


def start_method_text() -> str:
    return "\n".join(START_METHOD_RULE)


def build_help_menu(window: QMainWindow) -> HelpMenu:
    """Help → Keyboard shortcuts, Start methods, Documentation ▸, About gpuscope."""
    menu = window.menuBar().addMenu("&Help")
    keys = QAction("&Keyboard shortcuts", window, shortcut=QKeySequence("F1"))
    keys.triggered.connect(lambda: show_dialog(ShortcutsDialog(collect_shortcuts(window), window)))
    menu.addAction(keys)
    methods = QAction("&Start methods", window)
    methods.triggered.connect(lambda: show_dialog(_message(window, "Start methods", start_method_text(),
                                                           START_METHOD_MORE)))
    menu.addAction(methods)
    docs = menu.addMenu("&Documentation")
    links = doc_links()
    docs.setEnabled(bool(links))
    for title, url in links:
        action = docs.addAction(title)
        action.setToolTip(url.toString())
        action.triggered.connect(lambda _=False, u=url: QDesktopServices.openUrl(u))
    menu.addSeparator()
    about = QAction("&About gpuscope", window)
    about.triggered.connect(lambda: show_dialog(_message(window, "About gpuscope", about_text())))
    menu.addAction(about)
    return HelpMenu(menu, keys, methods, about)


def about_text() -> str:
    return (f"gpuscope {gpuscope.__version__}\n"
            "A profiling assistant for Python programs that fan out into processes and GPUs.")


def _message(parent: QWidget, title: str, text: str, more: str = "") -> QMessageBox:
    box = QMessageBox(QMessageBox.Icon.Information, title, text, QMessageBox.StandardButton.Ok, parent)
    box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    if more:
        box.setInformativeText(more)
    return box


def show_dialog(dialog: QDialog) -> QDialog:
    """Non-modal, deleted when closed; kept on the parent as ``last_help_dialog`` (tests read it)."""
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    parent = dialog.parent()
    if parent is not None:
        cast(Any, parent).last_help_dialog = dialog   # the window keeps the last one open
    dialog.open()
    return dialog


__all__ = ["Shortcut", "collect_shortcuts", "ShortcutsDialog", "build_help_menu", "doc_links", "START_METHOD_RULE"]
