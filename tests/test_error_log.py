"""The one error log (gpuscope.errors.log_internal_error): the CLI's last line of defence writes the
traceback there and prints one line naming it."""

from __future__ import annotations

import types

from gpuscope import cli, errors


def test_an_unexpected_error_is_one_line_and_a_logged_traceback(gpuscope_home, monkeypatch, capsys):
    def boom(_args):
        raise RuntimeError("the disk said no")

    real = cli._load
    monkeypatch.setattr(cli, "_load", lambda name: types.SimpleNamespace(
        run=boom, add_arguments=real(name).add_arguments))
    assert cli.main(["history"]) == 70
    err = capsys.readouterr().err.strip()
    log = gpuscope_home / errors.ERROR_LOG
    assert err == f"gpuscope: internal error: RuntimeError: the disk said no (details in {log})"
    text = log.read_text()
    assert "Traceback" in text and "the disk said no" in text and "argv=" in text


def test_an_unwritable_log_still_gives_the_line(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUSCOPE_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / errors.ERROR_LOG).mkdir()     # a folder where the log should be: open() fails
    assert errors.log_internal_error(ValueError("x"), "test") == ""
