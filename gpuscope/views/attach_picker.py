"""File → Attach to a running job…: the picker's rows, and what an attached session's view shows (Qt-free).

:class:`PickerModel` holds the rows of :func:`gpuscope.attach.candidates.list_trees` as the
dialog shows them (cells, tooltips, the chosen job kept across refreshes). :func:`identities` and
:func:`process_rows` turn an :class:`~gpuscope.attach.view.AttachView` into what the run view's
model (:class:`~gpuscope.views.live_model.LiveModel`) reads for a run's processes.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuscope.attach.candidates import TreeRow
    from gpuscope.attach.profile import Profile
    from gpuscope.attach.view import AttachView

COLUMNS = ("PID", "Job", "Command", "Age", "Procs", "CPU %", "RSS", "GPU mem", "User")
NUMERIC = ("PID", "Age", "Procs", "CPU %", "RSS", "GPU mem")
COMMAND_CHARS = 90        # the command cell's text (the tooltip has all of it)


def size_text(value: int | None) -> str:
    """Bytes as MiB / GiB; '—' when not read."""
    if value is None:
        return "—"
    if value >= 10 << 30:
        return f"{value / (1 << 30):.1f} GiB"
    return f"{value / (1 << 20):,.0f} MiB"


def age_text(seconds: float) -> str:
    """12 s, 4 min 05 s, 6 h 12 min, 3 d 2 h."""
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def command_text(cmdline: tuple[str, ...], limit: int = COMMAND_CHARS) -> str:
    """The command line; when too long, its paths by their last part first (the script's name shows)."""
    text = shlex.join(cmdline) if cmdline else "?"
    if len(text) > limit:
        text = " ".join(_short_path(a) if " " not in a else shlex.quote(a) for a in cmdline)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _short_path(arg: str) -> str:
    if "/" not in arg or arg.startswith("-"):
        return arg
    return arg if arg.count("/") == 1 and arg.startswith("/") else "…/" + arg.rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True)
class PickerRow:
    """One job of the picker: its cells (COLUMNS order), sort keys and the full command."""

    root_pid: int
    cells: tuple[str, ...]
    keys: tuple[float | str, ...]
    tooltip: str
    kind: str


def picker_row(tree: TreeRow) -> PickerRow:
    cells = (str(tree.root_pid), tree.kind, command_text(tree.cmdline), age_text(tree.age_s), str(tree.nprocs),
             f"{tree.cpu_percent:.0f}", size_text(tree.rss_bytes), size_text(tree.gpu_mem_bytes), tree.user)
    keys = (tree.root_pid, tree.kind, cells[2], tree.age_s, tree.nprocs, tree.cpu_percent, tree.rss_bytes,
            -1 if tree.gpu_mem_bytes is None else tree.gpu_mem_bytes, tree.user)
    tip = (f"{shlex.join(tree.cmdline)}\n{tree.kind}, {tree.nprocs} process(es), started {age_text(tree.age_s)} ago;"
           f" CPU {tree.cpu_percent:.0f} % of a core on average since")
    return PickerRow(tree.root_pid, cells, keys, tip, tree.kind)


class PickerModel:
    """The picker's rows; the chosen root pid stays chosen while it is listed."""

    def __init__(self) -> None:
        self.rows: list[PickerRow] = []
        self.chosen: int | None = None
        self.error: str | None = None
        self.refreshes = 0

    def update(self, trees: list[TreeRow]) -> None:
        self.rows = [picker_row(t) for t in trees]
        self.error = None
        self.refreshes += 1
        if self.chosen is not None and self.index_of(self.chosen) is None:
            self.chosen = None           # that job has ended

    def failed(self, text: str) -> None:
        self.error = text
        self.refreshes += 1

    def index_of(self, root_pid: int) -> int | None:
        return next((i for i, r in enumerate(self.rows) if r.root_pid == root_pid), None)

    def choose(self, root_pid: int | None) -> None:
        self.chosen = root_pid if root_pid is None or self.index_of(root_pid) is not None else None

    def status_line(self) -> str:
        if self.error:
            return f"could not list processes: {self.error}"
        if not self.rows:
            return "no Python job of yours is running (gpuscope's own processes are not listed)"
        procs = sum(int(r.cells[4]) for r in self.rows)
        return f"{len(self.rows)} Python job(s), {procs} process(es); the list refreshes while this is open"


@dataclass(frozen=True)
class Identity:
    """What :meth:`gpuscope.views.live_model.LiveModel.set_identities` reads of a process."""

    role: str
    rank: int | None
    worker_id: int | None = None


def identities(view: AttachView) -> dict[int, Identity]:
    """pid -> role and rank, as read from the outside (:mod:`gpuscope.attach.roles`)."""
    return {p.pid: Identity(p.role, p.rank) for p in view.processes}


def title_text(view: AttachView, cmdline: tuple[str, ...] = ()) -> str:
    """The live view's title: the job, the root and the run it is recorded as."""
    root = view.process(view.root_pid)
    cmd = command_text(cmdline or (root.cmdline if root is not None else ()), 60)
    run = f" · run {view.run_id}" if view.run_id else ""
    return f"attached: {cmd} · pid {view.root_pid}{run}"


def state_line(view: AttachView, idle_s: float | None = None) -> str:
    """One line: processes alive, roles, ended or followed."""
    alive = [p for p in view.processes if p.alive and p.state != "zombie"]
    roles: dict[str, int] = {}
    for p in alive:
        roles[p.role] = roles.get(p.role, 0) + 1
    parts = ", ".join(f"{n} {role}" if n > 1 else role for role, n in sorted(roles.items(), key=lambda kv: -kv[1]))
    if view.ended:
        return f"the job has ended ({len(view.processes)} process(es) seen)"
    head = f"following {len(alive)} process(es): {parts}" if parts else "following the job"
    return head + (f"; no CPU for {idle_s:.0f} s" if idle_s is not None and idle_s >= 5 else "")


def refusal_lines(view: AttachView) -> list[str]:
    """What could not be read, for which processes, and the one step that fixes it."""
    return [r.line() for r in view.refused]


@dataclass(frozen=True)
class TopRow:
    """One row of the profile's top functions."""

    role: str
    function: str
    where: str
    samples: int
    share: float


def top_rows(profile: Profile, per_role: int = 8) -> list[TopRow]:
    """The profile's top functions (self samples), per role, the roles with most samples first."""
    out: list[TopRow] = []
    order = sorted(profile.top.items(), key=lambda kv: -sum(t.samples for t in kv[1]))
    for role, rows in order:
        for t in rows[:per_role]:
            where = f"{t.file.rsplit('/', 1)[-1]}:{t.line}" if t.file else ""
            out.append(TopRow(role, t.function, where, t.samples, t.share))
    return out


def profile_line(profile: Profile) -> str:
    if not profile.samples:
        return f"no samples: {profile.note or 'nothing ran Python code'}"
    return (f"{profile.samples:,} samples of {len(profile.per_pid)} process(es) in {profile.seconds:g} s"
            f" (py-spy, not paused); saved as {profile.path}")
