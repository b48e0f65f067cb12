"""Timeline pages: a report read on the agent, the rows of a time window pulled as columns."""

from __future__ import annotations

import numpy as np
import pytest

from gpuscope import api
from gpuscope.remote.connection import connect_local
from gpuscope.remote.protocol import RemoteError
from gpuscope.remote.timelineops import decode_column

pytestmark = pytest.mark.timeout(180)

SCRIPT = """
import nvtx, time
for i in range(60):
    with nvtx.annotate(f"step {i % 3}", domain="work" if i % 2 else None):
        time.sleep(0.002)
"""


def test_pages_are_the_reports_rows_of_the_window(tmp_path):
    script = tmp_path / "nv.py"
    script.write_text(SCRIPT)
    conn = connect_local()
    try:
        run_id = conn.request("exec", {"argv": ["run", "--json", str(script)]}, timeout=120)["run_id"]
        info = conn.request("timeline_info", {"run": run_id}, timeout=120)
        assert info["counts"]["ranges"] == 60
        local = api.load_report(api.open_run(run_id).run_folder).timeline
        assert len(local.domains) >= 1
        for name, column in local.domains.columns().items():
            assert np.array_equal(decode_column(info["domains"][name]), column), name
        assert {info["strings"][str(i)] for i in local.domains.name_id.tolist() if i >= 0} == \
            {local.strings.get(i) for i in local.domains.name_id.tolist() if i >= 0}
        t0 = int(np.sort(local.ranges.start_ns)[20])
        t1 = int(np.sort(local.ranges.start_ns)[40])
        page = conn.request("timeline_page", {"run": run_id, "table": "ranges", "t0_ns": t0, "t1_ns": t1}, timeout=60)
        want = np.flatnonzero((local.ranges.end_ns >= t0) & (local.ranges.start_ns < t1))
        assert page["total"] == len(want) and not page["truncated"]
        for name, column in page["columns"].items():
            assert np.array_equal(decode_column(column), getattr(local.ranges, name)[want]), name
        names = {page["strings"][str(i)] for i in decode_column(page["columns"]["name_id"]).tolist()}
        assert names <= {"step 0", "step 1", "step 2"} and len(names) == 3
        small = conn.request("timeline_page", {"run": run_id, "t0_ns": 0, "limit": 5}, timeout=60)
        assert small["total"] == 60 and small["truncated"] and len(decode_column(small["columns"]["pid"])) == 5
        durations = np.sort(local.ranges.end_ns - local.ranges.start_ns)
        cut = int(durations[30])
        wide = conn.request("timeline_page", {"run": run_id, "t0_ns": 0, "min_ns": cut}, timeout=60)
        assert len(decode_column(wide["columns"]["pid"])) == int((durations >= cut).sum())
        assert wide["total"] == 60 and wide["narrow"] == int((durations < cut).sum())
        with pytest.raises(RemoteError, match="table is one of"):
            conn.request("timeline_page", {"run": run_id, "table": "nope"})
    finally:
        conn.close()
