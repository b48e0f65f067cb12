"""Findings of ``gpuscope attach`` (a job gpuscope did not start, read from outside): declared
here so the rules table lists them; decided live by :mod:`gpuscope.attach.checks` and kept in the
attached run's ``findings.json``. ``left-running``, ``rank-not-in-collective``, ``idle-gpu-memory``
and the telemetry rules are the existing ones, on the attached tree."""

from __future__ import annotations

from gpuscope.findings.registry import Input, Phase, declare

for _code, _inputs, _title in (
        ("looks-stuck", {Input.TELEMETRY, Input.STACKS, Input.PROCS},
         "an attached job used no CPU and its stacks did not change"),
        ("orphaned-worker", {Input.PROCS}, "a worker of an attached job lost its parent and still runs"),
        ("zombie", {Input.PROCS}, "a process ended and its parent has not waited for it"),
        ("oom-kill", {Input.PROCS}, "the OOM killer ended a process of the attached job's memory cgroup"),
        ("memory-pressure", {Input.TELEMETRY}, "the host's memory nearly all used while attached")):
    declare(_code, inputs=_inputs, phase=Phase.LIVE, title=_title, module="gpuscope.findings.attach_rules")
