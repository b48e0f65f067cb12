"""History's lines without Qt: a recorded series takes one line, expands into its runs in the
order they ran, and a damaged series record leaves the runs listed one by one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuscope.spec import RunSpec
from gpuscope.status import RunStatus
from gpuscope.views import history as H
from gpuscope.views.series_index import load_series, save_series, series_dir


@dataclass
class Row:
    """The fields of a store RunRow that History reads (the store itself is tested in tests/store)."""

    id: str
    started_ns: int
    status: RunStatus = RunStatus.EXITED
    script: str = "pool.py"
    launcher: str = "python"
    start_method: str = "spawn"
    created_ns: int = 0
    signal: str | None = None
    exit_code: int | None = 0
    spec: dict[str, Any] = field(default_factory=dict)
    duration_s: float | None = 1.5


def _data(series) -> H.HistoryData:
    rows = [Row("e", 50), Row("d", 40), Row("c", 30), Row("b", 20), Row("a", 10)]     # newest first
    return H.HistoryData(rows, {r.id: 1000 for r in rows}, series=series)


def test_a_series_is_one_line_until_expanded(gpuscope_home):
    s = save_series({"fork": ["b", "d"], "spawn": ["c", "a"]}, RunSpec(script="pool.py"), ["fork", "spawn"], 2)
    assert load_series() == [s]
    data = _data(load_series())
    lines = H.entries(data)
    assert [(x.row, x.series.id if x.series else None, x.depth) for x in lines] == [(0, None, 0), (None, s.id, 0)]
    opened = H.entries(data, {s.id})
    assert [data.rows[x.row].id for x in opened[2:]] == ["a", "b", "c", "d"]          # the order they ran
    assert all(x.depth == 1 for x in opened[2:])
    cells = H.series_cells(data, s, expanded=False)
    assert cells[0] == f"▸ series {s.id}" and cells[5] == "fork vs spawn, ×2" and cells[7] == "4 runs"
    assert cells[8] == "6.0 s" and cells[9] == H.human(4000)
    assert H.cells(data.rows[1], 1000, depth=1)[0] == "    d"


def test_a_damaged_series_record_is_skipped(gpuscope_home):
    save_series({"fork": ["b"], "spawn": ["c"]}, RunSpec(script="pool.py"), ["fork", "spawn"], 1)
    (series_dir() / "broken.json").write_text("{not json")
    (series_dir() / "partial.json").write_text('{"id": "x"}')
    assert len(load_series()) == 1
    assert len(H.entries(_data([]))) == 5                                               # no series: one line per run
