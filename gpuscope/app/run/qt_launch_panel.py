"""The launch panel: what to run and how, as a :class:`gpuscope.spec.RunSpec`; Run and Stop."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, cast

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from gpuscope.app.remote.core import remote, run_python
from gpuscope.app.settings import get_json, push_recent, set_json
from gpuscope.errors import UserError
from gpuscope.findings.fixes import describe, launch_changes
from gpuscope.spec import LAUNCHERS, START_METHODS, NsysOptions, RunSpec, TorchProfileOptions
from gpuscope.spec_checks import NSYS_TRACE, START_METHOD_HELP, parse_ints
from gpuscope.views.launch_checks import default_python, fork_warning

if TYPE_CHECKING:
    from gpuscope.fix import Fix

NSYS_TRACES = ("nvtx", "osrt", "cuda", "cublas", "cudnn")
TARGET_KINDS = (("script", "Script"), ("module", "Module (-m)"))
SCRIPT_HINT = "script.py: browse, drop a file, or pick a recent one"
MODULE_HINT = "package.module: run as python -m, from the working dir"
FORK_CHOICES = (("auto", None, "auto: on for fork runs"), ("on", True, "always"), ("off", False, "never"))
COMPARE_METHODS = ("fork", "spawn", "forkserver")
COMPARE_DEFAULT = ("fork", "spawn")


def _grid(widgets: list[QWidget], columns: int) -> QWidget:
    box = QWidget()
    lay = QGridLayout(box)
    lay.setContentsMargins(0, 0, 0, 0)
    for i, w in enumerate(widgets):
        lay.addWidget(w, i // columns, i % columns)
    return box


def _narrow(combo: QComboBox, chars: int = 16) -> QComboBox:
    """A combo box that does not widen the panel to fit its longest entry."""
    combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    combo.setMinimumContentsLength(chars)
    return combo


def _row(*widgets: QWidget) -> QWidget:
    box = QWidget()
    lay = QHBoxLayout(box)
    lay.setContentsMargins(0, 0, 0, 0)
    for w in widgets:
        lay.addWidget(w)
    return box


class QtLaunchPanel(QWidget):
    """Emits ``sigRun(spec)`` with a validated RunSpec, ``sigStop()``, ``sigError(text)``,
    ``sigCompare(spec, methods, repeat)`` ("Compare start methods")."""

    sigRun = Signal(object)      # a validated gpuscope.spec.RunSpec
    sigCompare = Signal(object, list, int)
    sigStop = Signal()
    sigError = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAcceptDrops(True)
        self._build()
        self._connect()
        self._update_method_help()
        self.set_running(False)

    # -- building -------------------------------------------------------------------------------
    def _build(self) -> None:
        self.kind = _narrow(QComboBox(), 12)
        for key, text in TARGET_KINDS:
            self.kind.addItem(text, key)
        self.kind.setToolTip("Run a script file, or a module as `python -m package.module`")
        self.script = _narrow(QComboBox(editable=True), 14)
        self.script.setToolTip("The Python script to run (drop a file here, or pick a recent one)")
        self.script_edit.setPlaceholderText(SCRIPT_HINT)
        # recent scripts: long paths lose their start, never the file name (full path in the tooltip)
        self.script.view().setTextElideMode(Qt.TextElideMode.ElideLeft)
        self._script_args: dict[str, str] = {}    # the arguments last run with each script
        self.browse_script = QPushButton("Browse…")
        self.args = QLineEdit(placeholderText="arguments for the script (shell quoting)")
        self.cwd = QLineEdit(placeholderText="(the script's folder)")
        self.browse_cwd = QPushButton("…")
        self.python = QLineEdit(placeholderText=default_python())
        self.python.setToolTip("Interpreter: this one by default, or another virtualenv's bin/python")
        self.browse_python = QPushButton("…")
        self.method = _narrow(QComboBox(), 10)
        for m in START_METHODS:
            self.method.addItem(m, m)
            self.method.setItemData(self.method.count() - 1, START_METHOD_HELP[m], 3)  # ToolTipRole
        self.method_help = QLabel(wordWrap=True)
        self.method_help.setStyleSheet("color: palette(mid);")
        self.preload = QLineEdit(placeholderText="modules the forkserver imports once, e.g. numpy, torch")
        self.preload.setToolTip("multiprocessing.set_forkserver_preload: the forkserver imports these once and "
                                "each worker forks from it with them loaded (comma separated)")
        self.fork_warning = QLabel(wordWrap=True)
        self.fork_warning.setStyleSheet("color: #8a4500; background: #fff3cd; border: 1px solid #e0b252;"
                                        " border-radius: 3px; padding: 4px;")
        self.fork_warning.hide()
        self.launcher = _narrow(QComboBox(), 8)
        self.launcher.addItems(list(LAUNCHERS))
        self.nproc = QSpinBox(minimum=1, maximum=512, value=2, prefix="nproc ")
        self.annotate = QLineEdit(placeholderText="module:function, module:Class.* (comma separated)")
        self._build_nsys()
        self._build_torch_profile()
        self._build_compare()
        self.run_button = QPushButton("▶ Run")
        self.run_button.setDefault(True)
        self.stop_button = QPushButton("■ Stop")
        self.stop_button.setToolTip("SIGINT to the whole tree, then SIGTERM, then SIGKILL; again = kill now")
        form = self._form = QFormLayout()
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        self.target_label = QLabel("Script")
        form.addRow("Run", self.kind)
        form.addRow(self.target_label, _row(self.script, self.browse_script))
        form.addRow("Arguments", self.args)
        form.addRow("Working dir", _row(self.cwd, self.browse_cwd))
        form.addRow("Interpreter", _row(self.python, self.browse_python))
        form.addRow("Start method", self.method)
        form.addRow("", self.method_help)
        form.addRow("Preload", self.preload)
        form.addRow("", self.fork_warning)
        form.addRow("Launcher", _row(self.launcher, self.nproc))
        form.addRow("Annotate", self.annotate)
        # the fields scroll; Run and Stop are pinned below them, visible at any window height
        fields = QWidget()
        inner = QVBoxLayout(fields)
        inner.addLayout(form)
        inner.addWidget(self.nsys)
        inner.addWidget(self.torch_profile)
        inner.addWidget(self.compare_box)
        inner.addStretch(1)
        self.fields_scroll = QScrollArea()
        self.fields_scroll.setWidgetResizable(True)
        self.fields_scroll.setWidget(fields)
        self.fields_scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.fields_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        # never narrower than its fields (they would be cut: there is no sideways scrolling)
        bar_w = self.fields_scroll.verticalScrollBar().sizeHint().width()
        self.setMinimumWidth(fields.minimumSizeHint().width() + bar_w)
        self.buttons = _row(self.run_button, self.stop_button)
        cast(QLayout, self.buttons.layout()).setContentsMargins(9, 4, 9, 6)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(0)
        outer.addWidget(self.fields_scroll, 1)
        outer.addWidget(self.buttons)

    def _build_nsys(self) -> None:
        self.nsys = QGroupBox("Record with Nsight Systems (nsys)", checkable=True, checked=False)
        self.traces = {t: QCheckBox(t) for t in NSYS_TRACES}
        for t in NSYS_TRACE:
            self.traces[t].setChecked(True)
        self.fork = _narrow(QComboBox(), 12)
        for key, _, text in FORK_CHOICES:
            self.fork.addItem(f"{key} ({text})", key)
        self.fork.setToolTip("--trace-fork-before-exec: lets nsys see fork children (needed for fork pools)")
        nsys_form = QFormLayout(self.nsys)
        nsys_form.addRow("trace", _grid(list(self.traces.values()), 3))
        nsys_form.addRow("fork children", self.fork)

    def _build_torch_profile(self) -> None:
        """--torch-profile's choices (docs/TORCH-PROFILER.md)."""
        self.torch_profile = QGroupBox("Profile with torch.profiler", checkable=True, checked=False)
        self.torch_profile.setToolTip("torch.profiler in every torch process of the run, the script unedited: "
                                      "a trace per process in the run (gpuscope run --torch-profile)")
        self.tp_ranks = QLineEdit(placeholderText="all (or ranks: 0,2)")
        self.tp_schedule = QLineEdit(placeholderText="the whole process (or WAIT,WARMUP,ACTIVE[,REPEAT])")
        self.tp_schedule.setToolTip("Optimizer steps to profile: a step is one optimizer.step()")
        self.tp_options = {k: QCheckBox(k) for k in ("shapes", "memory", "stack")}
        tp_form = QFormLayout(self.torch_profile)
        tp_form.addRow("ranks", self.tp_ranks)
        tp_form.addRow("schedule", self.tp_schedule)
        tp_form.addRow("record", _row(*self.tp_options.values()))

    def torch_profile_options(self) -> TorchProfileOptions:
        """The torch.profiler group as options (checked by RunSpec.validated)."""
        if not self.torch_profile.isChecked():
            return TorchProfileOptions()
        ranks = self.tp_ranks.text().strip()
        steps = self.tp_schedule.text().strip()
        return TorchProfileOptions(
            enabled=True, ranks=parse_ints(ranks, "torch.profiler ranks") if ranks and ranks != "all" else None,
            schedule=parse_ints(steps, "torch.profiler schedule") if steps else None,
            **{k: box.isChecked() for k, box in self.tp_options.items()})

    def _set_torch_profile(self, options: TorchProfileOptions) -> None:
        self.torch_profile.setChecked(options.enabled)
        self.tp_ranks.setText("" if options.ranks is None else ",".join(map(str, options.ranks)))
        self.tp_schedule.setText("" if options.schedule is None else ",".join(map(str, options.schedule)))
        for k, box in self.tp_options.items():
            box.setChecked(bool(getattr(options, k)))

    def _build_compare(self) -> None:
        self.compare_box = QGroupBox("Compare start methods")
        self.compare_box.setToolTip("Run the same script, arguments, interpreter and options under each ticked "
                                    "method, alternated (A B A B …), then compare them in the Compare tab")
        self.compare_methods = {m: QCheckBox(m) for m in COMPARE_METHODS}
        for m in COMPARE_DEFAULT:
            self.compare_methods[m].setChecked(True)
        self.repeat = QSpinBox(minimum=1, maximum=50, value=3, prefix="repeat ", suffix="×")
        self.repeat.setToolTip("Runs per method; the comparison shows the median with min–max over the repeats")
        self.compare_button = QPushButton("⇄ Compare")
        lay = QVBoxLayout(self.compare_box)
        lay.addWidget(_row(*self.compare_methods.values()))
        lay.addWidget(_row(self.repeat, self.compare_button))

    def _connect(self) -> None:
        self.browse_script.clicked.connect(self._pick_script)
        self.kind.currentIndexChanged.connect(self._kind_changed)
        self.browse_cwd.clicked.connect(self._pick_cwd)
        self.browse_python.clicked.connect(self._pick_python)
        self.method.currentIndexChanged.connect(self._update_method_help)
        self.script.currentTextChanged.connect(self._update_method_help)
        self.script.currentTextChanged.connect(self._script_text_changed)
        self.script.activated.connect(self._recent_chosen)
        self.launcher.currentTextChanged.connect(lambda t: self.nproc.setEnabled(t == "torchrun"))
        self.run_button.clicked.connect(self._on_run)
        self.compare_button.clicked.connect(self._on_compare)
        self.stop_button.clicked.connect(self.sigStop.emit)
        self.nproc.setEnabled(False)

    # -- pickers and drops ----------------------------------------------------------------------
    def _pick_script(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Choose a Python script", self._start_dir(),
                                              "Python scripts (*.py);;All files (*)")
        if path:
            self.set_script(path)

    def _pick_cwd(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Working directory", self._start_dir())
        if path:
            self.cwd.setText(path)

    def _pick_python(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Python interpreter (e.g. a virtualenv's bin/python)",
                                              str(Path(sys.executable).parent))
        if path:
            self.python.setText(path)

    def _start_dir(self) -> str:
        text = self.script.currentText().strip()
        return str(Path(text).parent) if text else str(Path.cwd())

    def dragEnterEvent(self, event) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:
        for url in event.mimeData().urls():
            if url.isLocalFile():
                self.set_script(url.toLocalFile())
                event.acceptProposedAction()
                return

    @property
    def script_edit(self) -> QLineEdit:
        """The script box's line (the box is editable: it always has one)."""
        return cast(QLineEdit, self.script.lineEdit())

    @property
    def is_module(self) -> bool:
        return self.kind.currentData() == "module"

    def _kind_changed(self) -> None:
        module = self.is_module
        self.script_edit.setPlaceholderText(MODULE_HINT if module else SCRIPT_HINT)
        self.browse_script.setEnabled(not module)
        self.target_label.setText("Module" if module else "Script")
        self.cwd.setPlaceholderText("(where the module is importable from)" if module else "(the script's folder)")
        self._update_method_help()

    def set_module(self, name: str) -> None:
        self.kind.setCurrentIndex(self.kind.findData("module"))
        self.script.setCurrentText(name)

    def set_script(self, path: str) -> None:
        self.kind.setCurrentIndex(self.kind.findData("script"))
        self.script.setCurrentText(path)
        self._update_method_help()

    def _script_text_changed(self, text: str) -> None:
        """The full path in the tooltip; the line shows its end (the file name) when it is too long."""
        self.script.setToolTip(text or "The Python script to run (drop a file here, or pick a recent one)")
        edit = self.script_edit
        if not edit.hasFocus():
            edit.setCursorPosition(len(text))

    def _recent_chosen(self, index: int) -> None:
        """A recent script picked from the list: its arguments of the last time it ran come back."""
        args = self._script_args.get(self.script.itemText(index))
        if args is not None:
            self.args.setText(args)

    def _set_recent(self, recent: list[str]) -> None:
        current = self.script.currentText()
        self.script.blockSignals(True)
        self.script.clear()
        for i, path in enumerate(recent):
            self.script.addItem(path)
            self.script.setItemData(i, path, Qt.ItemDataRole.ToolTipRole)
        self.script.setCurrentText(current)
        self.script.blockSignals(False)

    # -- state ----------------------------------------------------------------------------------
    def _update_method_help(self) -> None:
        method = self.method.currentData() or "default"
        self.method_help.setText(START_METHOD_HELP[method])
        self._form.setRowVisible(self.preload, method == "forkserver")   # the forkserver's field only
        warning = (fork_warning(self._script_path(), method)
                   if self.script.currentText().strip() and not self.is_module else None)
        self.fork_warning.setText(f"⚠ {warning}" if warning else "")
        self.fork_warning.setVisible(bool(warning))

    def _script_path(self) -> str:
        text = self.script.currentText().strip()
        p = Path(text).expanduser()
        if not p.is_absolute() and self.cwd.text().strip():
            p = Path(self.cwd.text().strip()) / p
        return str(p)

    def set_running(self, running: bool) -> None:
        self.run_button.setEnabled(not running)
        self.compare_button.setEnabled(not running)
        self.stop_button.setEnabled(running)

    def set_comparing(self, comparing: bool) -> None:
        """A series runs: Stop ends it, Run and Compare wait."""
        self.compare_button.setText("⇄ Comparing…" if comparing else "⇄ Compare")

    def compare_choice(self) -> tuple[list[str], int]:
        """The ticked start methods (in fork, spawn, forkserver order) and the repeat count."""
        return [m for m, box in self.compare_methods.items() if box.isChecked()], self.repeat.value()

    def spec(self) -> RunSpec:
        """The RunSpec the fields describe, validated (UserError with one line if not)."""
        target = self.script.currentText().strip()
        if not target:
            raise UserError("choose a module to run" if self.is_module else "choose a script to run")
        try:
            args = tuple(shlex.split(self.args.text()))
        except ValueError as exc:
            raise UserError(f"arguments: {exc}") from None
        if self.is_module:
            cwd = self.cwd.text().strip() or str(Path.cwd())
        else:
            cwd = self.cwd.text().strip() or str(Path(self._script_path()).parent)
        annotate = tuple(a.strip() for a in self.annotate.text().split(",") if a.strip())
        fork = dict((k, v) for k, v, _ in FORK_CHOICES)[self.fork.currentData()]
        nsys = NsysOptions(enabled=self.nsys.isChecked(),
                           trace=tuple(t for t, box in self.traces.items() if box.isChecked()),
                           trace_fork=fork)
        script, module = ("", target) if self.is_module else (target, None)
        preload = tuple(m.strip() for m in self.preload.text().split(",") if m.strip()) \
            if self.method.currentData() == "forkserver" else ()
        spec = RunSpec(script=script, module=module, args=args, cwd=cwd, forkserver_preload=preload,
                       python=self.python.text().strip() or run_python() or default_python(),
                       start_method=self.method.currentData(), launcher=self.launcher.currentText(),
                       nproc=self.nproc.value(), annotate=annotate, nsys=nsys,
                       torch_profile=self.torch_profile_options())
        return spec if remote() is not None else spec.validated()   # a remote host checks its own paths

    def _on_run(self) -> None:
        try:
            spec = self.spec()
        except UserError as exc:
            self.sigError.emit(str(exc))
            return
        self.sigRun.emit(spec)

    def _on_compare(self) -> None:
        methods, repeat = self.compare_choice()
        try:
            if len(methods) < 2:
                raise UserError("tick two or three start methods to compare")
            if self.launcher.currentText() != "python":
                raise UserError("start methods are compared for the python launcher (torchrun starts its own "
                                "processes)")
            spec = self.spec()
        except UserError as exc:
            self.sigError.emit(str(exc))
            return
        self.sigCompare.emit(spec, methods, repeat)

    def apply_fix(self, fix: "Fix | None") -> str:
        """Apply a structured fix to the fields; returns what changed (one line, for the status bar)."""
        changes = launch_changes(fix)
        if "start_method" in changes:
            self.method.setCurrentIndex(self.method.findData(changes["start_method"]))
        if changes.get("nsys") == "on":
            self.nsys.setChecked(True)
        if "nsys_fork" in changes:
            self.fork.setCurrentIndex(self.fork.findData(changes["nsys_fork"]))
        if "forkserver_preload" in changes:
            self.preload.setText(", ".join(m for m in changes["forkserver_preload"].split(",") if m))
        if not changes:
            return f"no automatic change for this fix; do it by hand: {describe(fix) or 'see the report'}"
        return "next run: " + ", ".join(f"{k.replace('_', ' ')} = {v}" for k, v in changes.items())

    def set_spec(self, spec: RunSpec) -> str:
        """Fill every field from ``spec`` (History's "Run again with these settings"), so that
        :meth:`spec` gives it back; returns one line for the status bar, naming what the panel has
        no field for (those parts of ``spec`` are not carried)."""
        if spec.is_module:
            self.set_module(str(spec.module))
        else:
            self.set_script(spec.script)
        self.args.setText(shlex.join(spec.args))
        self.cwd.setText(spec.cwd or "")
        self.python.setText(spec.python or "")
        self.method.setCurrentIndex(max(0, self.method.findData(spec.start_method)))
        self.preload.setText(", ".join(spec.forkserver_preload))
        self.launcher.setCurrentText(spec.launcher)
        self.nproc.setValue(int(spec.nproc))
        self.annotate.setText(", ".join(spec.annotate))
        self.nsys.setChecked(spec.nsys.enabled)
        for t, box in self.traces.items():
            box.setChecked(t in spec.nsys.trace)
        fork = next(key for key, value, _ in FORK_CHOICES if value == spec.nsys.trace_fork)
        self.fork.setCurrentIndex(self.fork.findData(fork))
        self._set_torch_profile(spec.torch_profile)
        self._update_method_help()
        default = RunSpec(script="")
        left = [text for text, differs in (
            ("nsys trace " + ",".join(t for t in spec.nsys.trace if t not in self.traces),
             any(t not in self.traces for t in spec.nsys.trace)),
            ("nsys arguments " + " ".join(spec.nsys.extra_args), bool(spec.nsys.extra_args)),
            ("environment " + ", ".join(k for k, _ in spec.env), bool(spec.env)),
            (f"sampling interval {spec.sample_interval_s:g} s", spec.sample_interval_s != default.sample_interval_s),
            ("the multi-node settings", spec.multinode)) if differs]
        target = f"-m {spec.module}" if spec.is_module else Path(spec.script).name
        line = f"launch panel: the settings of {target} {shlex.join(spec.args)}".rstrip()
        return line + (f" (not carried, the panel has no field for: {'; '.join(left)})" if left else "")

    def _torch_profile_fields(self) -> dict[str, object]:
        """The group's fields as saved (kept even when they do not parse yet)."""
        try:
            options = self.torch_profile_options()
        except UserError:
            options = TorchProfileOptions(enabled=self.torch_profile.isChecked())
        return {"enabled": options.enabled, "ranks": options.ranks, "schedule": options.schedule,
                **{k: box.isChecked() for k, box in self.tp_options.items()}}

    # -- settings -------------------------------------------------------------------------------
    def load(self, s: QSettings) -> None:
        d = get_json(s, "launch/fields", {})
        recent = get_json(s, "launch/recent", [])
        self._script_args = dict(get_json(s, "launch/script_args", {}))
        self._set_recent(recent)
        self.kind.setCurrentIndex(max(0, self.kind.findData(d.get("kind", "script"))))
        self.script.setCurrentText(d.get("script", recent[0] if recent else ""))
        self.args.setText(d.get("args", ""))
        self.cwd.setText(d.get("cwd", ""))
        self.python.setText(d.get("python", ""))
        self.method.setCurrentIndex(max(0, self.method.findData(d.get("start_method", "default"))))
        self.preload.setText(d.get("forkserver_preload", ""))
        self.launcher.setCurrentText(d.get("launcher", "python"))
        self.nproc.setValue(int(d.get("nproc", 2)))
        self.annotate.setText(d.get("annotate", ""))
        self.nsys.setChecked(bool(d.get("nsys", False)))
        for t, box in self.traces.items():
            box.setChecked(t in d.get("nsys_trace", list(NSYS_TRACE)))
        self.fork.setCurrentIndex(max(0, self.fork.findData(d.get("nsys_fork", "auto"))))
        for m, box in self.compare_methods.items():
            box.setChecked(m in d.get("compare_methods", list(COMPARE_DEFAULT)))
        self.repeat.setValue(int(d.get("compare_repeat", 3)))
        self._set_torch_profile(TorchProfileOptions.from_dict(d.get("torch_profile")))
        self._update_method_help()

    def save(self, s: QSettings, ran: bool = False) -> None:
        script = self.script.currentText().strip()
        set_json(s, "launch/fields", {
            "kind": self.kind.currentData(), "script": script, "args": self.args.text(), "cwd": self.cwd.text(),
            "python": self.python.text(),
            "start_method": self.method.currentData(), "forkserver_preload": self.preload.text(),
            "launcher": self.launcher.currentText(),
            "nproc": self.nproc.value(), "annotate": self.annotate.text(), "nsys": self.nsys.isChecked(),
            "nsys_trace": [t for t, b in self.traces.items() if b.isChecked()],
            "nsys_fork": self.fork.currentData(),
            "compare_methods": self.compare_choice()[0], "compare_repeat": self.repeat.value(),
            "torch_profile": self._torch_profile_fields()})
        if ran and script:
            recent = push_recent(s, script)
            self._script_args[script] = self.args.text()
            self._script_args = {k: v for k, v in self._script_args.items() if k in recent}
            set_json(s, "launch/script_args", self._script_args)
            self._set_recent(recent)
