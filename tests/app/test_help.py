"""Help menu: the shortcuts dialog reads the window's real keys; start methods, docs, About;
File → Open report starts in the runs folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from apphelpers import make_window
from PySide6.QtGui import QAction, QKeySequence, QShortcut
from PySide6.QtWidgets import QFileDialog

import gpuscope
from gpuscope.app import qt_help
from gpuscope.paths import runs_dir

pytestmark = pytest.mark.gui


def _keys(seq: str) -> str:
    return QKeySequence(seq).toString(QKeySequence.SequenceFormat.NativeText)


def test_shortcuts_dialog_lists_the_real_shortcuts(qtbot):
    w = make_window(qtbot)
    w.keys_action.trigger()
    dialog = w.last_help_dialog
    assert isinstance(dialog, qt_help.ShortcutsDialog)
    table = dialog.table
    shown = {(table.item(r, 0).text(), table.item(r, 1).text()) for r in range(table.rowCount())}
    # every action of the window with a key is listed, read from the actions themselves
    for action in w.findChildren(QAction):
        for seq in action.shortcuts():
            if not seq.isEmpty():
                assert any(seq.toString(QKeySequence.SequenceFormat.NativeText) in k for k, _ in shown), action.text()
    assert (_keys("Ctrl+R"), "Run") in shown and (_keys("Ctrl+."), "Stop") in shown
    assert (_keys("Ctrl+Shift+T"), "Take stacks") in shown and (_keys("F1"), "Keyboard shortcuts") in shown
    assert (_keys("Ctrl+O"), "Open report") in shown
    # keys widgets handle themselves (KEY_HELP next to their keyPressEvent): the timeline's, built for it
    assert ("Home", "fit the whole run, lanes back to the top") in shown
    assert ("Shift+Enter", "find the previous match") in shown
    # a shortcut added later to a live widget shows up without touching the help
    QShortcut(QKeySequence("Ctrl+Alt+J"), w.tree, whatsThis="jump to the main process")
    w.keys_action.trigger()
    rows = w.last_help_dialog.rows
    assert qt_help.Shortcut(_keys("Ctrl+Alt+J"), "jump to the main process", "Processes table") in rows
    where = {r.what: r.where for r in rows}
    assert where["Run"] == "Run menu" and where["fit the whole run, lanes back to the top"] == "timeline"
    assert all(r.what for r in rows), [r for r in rows if not r.what]     # every key says what it does


def test_start_methods_docs_and_about(qtbot, monkeypatch):
    w = make_window(qtbot)
    assert len(qt_help.START_METHOD_RULE) == 2
    fork, clean = qt_help.START_METHOD_RULE
    assert fork.startswith("fork:") and "threads" in fork and "CUDA" in fork
    assert clean.startswith("spawn / forkserver:") and "__main__" in clean
    w.methods_action.trigger()
    assert w.last_help_dialog.text() == "\n".join(qt_help.START_METHOD_RULE)
    w.about_action.trigger()
    assert gpuscope.__version__ in w.last_help_dialog.text()
    docs = next(a.menu() for a in w.help_menu.actions() if a.menu() is not None)
    titles = [a.text() for a in docs.actions()]
    links = dict(qt_help.doc_links())
    assert titles == list(links)
    # a source checkout: the local README and every docs/*.md, all existing files
    root = Path(gpuscope.__file__).resolve().parent.parent
    expected = {str(root / "README.md")} | {str(p) for p in (root / "docs").glob("*.md")}
    assert {u.toLocalFile() for u in links.values()} == expected
    opened = []
    monkeypatch.setattr(qt_help.QDesktopServices, "openUrl", staticmethod(lambda url: opened.append(url)))
    docs.actions()[0].trigger()
    assert [u.toLocalFile() for u in opened] == [str(root / "README.md")]


def test_open_report_starts_in_the_runs_folder(qtbot, monkeypatch):
    w = make_window(qtbot)
    asked = []
    monkeypatch.setattr(QFileDialog, "getOpenFileName",
                        staticmethod(lambda parent, title, folder, filt: (asked.append(folder), ("", ""))[1]))
    w.open_action.trigger()
    assert asked == [str(runs_dir())] and Path(asked[0]).is_dir()
    assert str(Path.home()) != asked[0]


def test_docs_links_without_a_source_checkout_go_to_the_project_site(monkeypatch):
    """An installed (not source) gpuscope has no docs folder: the links are the site's pages."""
    monkeypatch.setattr(qt_help, "docs_folder", lambda: None)
    links = qt_help.doc_links()
    site = qt_help.project_url()
    assert site and site.startswith("http")
    assert links[0] == ("README", qt_help.QUrl(f"{site}/README.md"))
    assert all(u.toString().startswith(site + "/") and u.toString().endswith(".md") for _, u in links)


def test_every_key_a_view_handles_itself_is_in_its_key_help(qtbot):
    """Keys handled in keyPressEvent are listed only through KEY_HELP: press every plain key on the
    timeline, and each one it accepts must be in its KEY_HELP (a key added to the timeline, W/A/S/D
    say, without its help row fails here)."""
    import re
    import string

    from PySide6.QtCore import QEvent, Qt
    from PySide6.QtGui import QKeyEvent

    from gpuscope.app.run.qt_console import QtConsole
    from gpuscope.app.timeline.qt_timeline import QtTimeline

    names = {Qt.Key.Key_Plus: "+", Qt.Key.Key_Equal: "+", Qt.Key.Key_Minus: "−", Qt.Key.Key_Home: "Home",
             Qt.Key.Key_End: "End", Qt.Key.Key_Left: "←", Qt.Key.Key_Right: "→", Qt.Key.Key_Up: "↑",
             Qt.Key.Key_Down: "↓", Qt.Key.Key_PageUp: "PgUp", Qt.Key.Key_PageDown: "PgDn",
             Qt.Key.Key_Space: "Space", Qt.Key.Key_Escape: "Esc", Qt.Key.Key_Delete: "Delete",
             Qt.Key.Key_Return: "Enter", Qt.Key.Key_Enter: "Enter"}
    for c in string.ascii_uppercase + string.digits:
        names[Qt.Key(ord(c))] = c
    timeline = QtTimeline()
    timeline.resize(600, 300)
    qtbot.addWidget(timeline)
    timeline.show()
    for view in (timeline,):     # (the console's keys work only in its focused find box)
        tokens = {t for keys, _ in type(view).KEY_HELP for t in re.split(r"[\s/,]+", keys) if t}
        tokens |= {t.split("+")[-1] for t in tokens if "+" in t and len(t) > 1}
        for key, name in names.items():
            for mods in (Qt.KeyboardModifier.NoModifier, Qt.KeyboardModifier.ShiftModifier):
                event = QKeyEvent(QEvent.Type.KeyPress, key, mods, name.lower() if len(name) == 1 else "")
                event.ignore()
                view.keyPressEvent(event)
                if event.isAccepted():
                    assert name in tokens, f"{type(view).__name__} handles {name!r} but its KEY_HELP does not list it"
    assert {"Enter", "Shift+Enter"} <= {k for k, _ in QtConsole.KEY_HELP}
