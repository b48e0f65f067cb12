"""The end of a run goes on from the findings recorder's live scans of the event logs."""

from __future__ import annotations

from gpuscope.findings import engine, process_rules


def test_the_end_goes_on_from_the_live_scans_of_the_logs(tmp_path):
    """``analyse_events(facts=)``, as the findings recorder calls it with its watchdog's scans:
    only the lines written since are read, and the findings are those of a fresh read."""
    events = tmp_path / "events"
    events.mkdir()
    (tmp_path / "stderr.log").write_bytes(b"")
    log = events / "100-1.log"
    head = b'H\t{"pid": 100, "ppid": 1, "role": "main", "anchor_mono_ns": 1, "anchor_wall_ns": 10}\n'
    log.write_bytes(head + b'I\t5\t{"child_exits": {"4242": -9}}\n')
    live = process_rules.ProcessFacts()
    assert process_rules.scan_info(events, live)                     # the watchdog's scan, during the run
    with open(log, "ab") as fh:                                        # then another child crashed
        fh.write(b'I\t9\t{"child_exits": {"4343": -11}}\n')
    fresh = engine.analyse_events(tmp_path, [])
    went_on = engine.analyse_events(tmp_path, [], facts=live)
    assert [f.to_dict() for f in went_on] == [f.to_dict() for f in fresh]
    assert sorted(live.child_exits) == [4242, 4343]                 # the new line read once, on from its offset
    assert "SIGSEGV" in fresh[0].to_dict()["title"] and "SIGKILL" in fresh[0].to_dict()["title"]
