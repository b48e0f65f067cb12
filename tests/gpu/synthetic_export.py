"""SYNTHETIC nsys exports for the GPU-sharing tests: no GPU records here, so a test writes one.

The tables and columns are those of real ``nsys export --type sqlite --lazy=false`` files of
2022.4 (schema 3.0.0), 2023.4 (3.7.2) and 2024.2 (3.11.1): names, order, types and NOT NULL as
``PRAGMA table_info`` shows them there (``greenContextId`` inserted after ``contextId`` from 2023.4
on; ``EXPORT_META_DATA`` in 2022.4, ``META_DATA_EXPORT`` later). ``test_synthetic_schema.py``
checks these lists against real exports of every provisioned nsys. Rows are written from known
intervals, so the tests can compute the expected figures by hand.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

VERSIONS = {"2022.4": ("2022.4.2.1", "3.0.0"), "2023.4": ("2023.4.4.54", "3.7.2"),
            "2024.2": ("2024.2.3.38", "3.11.1")}
VM = 1 << 48          # the VM bits of globalPid / globalTid on a single host

_ID = ["start:N", "end:N", "deviceId:N", "contextId:N", "streamId:N", "correlationId", "globalPid"]
_KERNEL = ["demangledName:N", "shortName:N", "mangledName", "launchType", "cacheConfig", "registersPerThread:N",
           "gridX:N", "gridY:N", "gridZ:N", "blockX:N", "blockY:N", "blockZ:N", "staticSharedMemory:N",
           "dynamicSharedMemory:N", "localMemoryPerThread:N", "localMemoryTotal:N", "gridId:N",
           "sharedMemoryExecuted", "graphNodeId", "sharedMemoryLimitConfig"]
_MEMCPY = ["bytes:N", "copyKind:N", "deprecatedSrcId", "srcKind", "dstKind", "srcDeviceId", "srcContextId",
           "dstDeviceId", "dstContextId", "migrationCause", "graphNodeId", "virtualAddress"]
_MEMSET = ["value:N", "bytes:N", "graphNodeId", "memKind"]
_GPU = ["vmId:N", "id:N", "name:T", "busLocation:T", "isDiscrete", "l2CacheSize", "totalMemory", "memoryBandwidth",
        "clockRate", "smCount", "pwGpuId", "uuid:T", "luid", "chipName:T", "cuDevice", "ctxswDevPath:T",
        "ctrlDevPath:T", "revision", "nodeMask", "constantMemory", "maxIPC", "maxRegistersPerBlock",
        "maxShmemPerBlock", "maxShmemPerBlockOptin", "maxShmemPerSm", "maxRegistersPerSm", "threadsPerWarp",
        "asyncEngines", "maxWarpsPerSm", "maxBlocksPerSm", "maxThreadsPerBlock", "maxBlockDimX", "maxBlockDimY",
        "maxBlockDimZ", "maxGridDimX", "maxGridDimY", "maxGridDimZ", "computeMajor", "computeMinor", "smMajor",
        "smMinor"]
_ENUM = ["id:NP", "name:T", "label:T"]

MEMCPY_OPER = {0: "Unknown", 1: "Host-to-Device", 2: "Device-to-Host", 8: "Device-to-Device", 10: "Peer-to-Peer"}
MEM_KIND = {0: "Pageable", 1: "Pinned", 2: "Device", 7: "Unknown"}
PAGEABLE, PINNED, DEVICE = 0, 1, 2
HTOD, DTOH = 1, 2


def columns(version: str) -> dict[str, list[str]]:
    """Each table's columns as ``name[:flags]`` (N = NOT NULL, P = primary key, T = TEXT)."""
    green = version != "2022.4"

    def ids() -> list[str]:
        return _ID[:4] + (["greenContextId"] if green else []) + _ID[4:]

    meta = "EXPORT_META_DATA" if version == "2022.4" else "META_DATA_EXPORT"
    return {
        "StringIds": ["id:NP", "value:NT"],
        meta: ["name:NT", "value:T"],
        "CUPTI_ACTIVITY_KIND_KERNEL": ids() + _KERNEL,
        "CUPTI_ACTIVITY_KIND_MEMCPY": ids() + _MEMCPY,
        "CUPTI_ACTIVITY_KIND_MEMSET": ids() + _MEMSET,
        "CUPTI_ACTIVITY_KIND_RUNTIME": ["start:N", "end:N", "eventClass:N", "globalTid", "correlationId",
                                        "nameId:N", "returnValue:N", "callchainId"],
        "TARGET_INFO_GPU": list(_GPU),
        "TARGET_INFO_SESSION_START_TIME": ["utcEpochNs", "utcTime:T", "localTime:T"],
        "ANALYSIS_DETAILS": ["globalVid:N", "duration:N", "startTime:N", "stopTime:N"],
        "PROCESSES": ["globalPid", "pid", "name:T"],
        "ENUM_CUDA_MEMCPY_OPER": list(_ENUM),
        "ENUM_CUDA_MEM_KIND": list(_ENUM),
    }


def table_info(version: str) -> dict[str, list[tuple[str, str, int, int]]]:
    """``columns`` as ``PRAGMA table_info`` rows: (name, type, notnull, pk)."""
    out = {}
    for table, cols in columns(version).items():
        rows = []
        for c in cols:
            name, _, flags = c.partition(":")
            rows.append((name, "TEXT" if "T" in flags else "INTEGER", int("N" in flags), int("P" in flags)))
        out[table] = rows
    return out


def _create(conn: sqlite3.Connection, version: str) -> None:
    for table, rows in table_info(version).items():
        defs = ", ".join(f"{n} {t}{' NOT NULL' if nn else ''}{' PRIMARY KEY' if pk else ''}"
                         for n, t, nn, pk in rows)
        conn.execute(f"CREATE TABLE {table} ({defs})")


@dataclass
class Kernel:
    """One kernel of a process on a device, ``[start, end)`` ns, launched (API call) at ``launch``."""

    pid: int
    device: int
    start: int
    end: int
    launch: int | None = None
    stream: int = 7
    name: str = "gemm"


@dataclass
class Copy:
    """One memcpy (``kind``: 1 HtoD, 2 DtoH...) or, with ``memset=True``, one memset."""

    pid: int
    device: int
    start: int
    end: int
    kind: int = HTOD
    src: int = PINNED
    dst: int = DEVICE
    nbytes: int = 1 << 20
    launch: int | None = None
    memset: bool = False


@dataclass
class Export:
    """What to write: GPU work, GPU names, and the session length."""

    kernels: list[Kernel] = field(default_factory=list)
    copies: list[Copy] = field(default_factory=list)
    gpus: dict[int, str] = field(default_factory=lambda: {0: "SYNTHETIC GPU 0", 1: "SYNTHETIC GPU 1"})
    duration: int = 10_000_000_000


def write(path: str | Path, export: Export, version: str = "2024.2") -> Path:
    """Write ``export`` as an nsys SQLite export of ``version`` (a key of ``VERSIONS``)."""
    path = Path(path)
    path.unlink(missing_ok=True)
    conn = sqlite3.connect(path)
    try:
        _create(conn, version)
        _meta(conn, version, export)
        strings = _Strings(conn)
        corr: dict[int, int] = {}
        for k in export.kernels:
            c = _next(corr, k.pid)
            _insert(conn, version, "CUPTI_ACTIVITY_KIND_KERNEL", _ids(k.pid, k.device, k.start, k.end, k.stream, c) | {
                "demangledName": strings.id(k.name), "shortName": strings.id(k.name), "registersPerThread": 32,
                "gridX": 64, "gridY": 1, "gridZ": 1, "blockX": 256, "blockY": 1, "blockZ": 1, "gridId": c,
                "launchType": 0})
            _api(conn, version, strings, k.pid, k.launch, c, "cudaLaunchKernel_v7000")
        for m in export.copies:
            c = _next(corr, m.pid)
            base = _ids(m.pid, m.device, m.start, m.end, 7, c)
            if m.memset:
                _insert(conn, version, "CUPTI_ACTIVITY_KIND_MEMSET",
                        base | {"value": 0, "bytes": m.nbytes, "memKind": m.dst})
                _api(conn, version, strings, m.pid, m.launch, c, "cudaMemsetAsync_v3020")
            else:
                _insert(conn, version, "CUPTI_ACTIVITY_KIND_MEMCPY", base | {
                    "bytes": m.nbytes, "copyKind": m.kind, "srcKind": m.src, "dstKind": m.dst,
                    "srcDeviceId": m.device, "dstDeviceId": m.device})
                _api(conn, version, strings, m.pid, m.launch, c, "cudaMemcpyAsync_v3020")
        for pid in sorted({k.pid for k in export.kernels} | {m.pid for m in export.copies}):
            conn.execute("INSERT INTO PROCESSES VALUES (?, ?, ?)", (VM | pid << 24, pid, f"python{pid}"))
        conn.commit()
    finally:
        conn.close()
    return path


def _meta(conn: sqlite3.Connection, version: str, export: Export) -> None:
    product, schema = VERSIONS[version]
    table = "EXPORT_META_DATA" if version == "2022.4" else "META_DATA_EXPORT"
    major, minor, micro = schema.split(".")
    for name, value in (("EXPORT_PRODUCT_VERSION", product), ("EXPORT_SCHEMA_VERSION", schema),
                        ("EXPORT_SCHEMA_VERSION_MAJOR", major), ("EXPORT_SCHEMA_VERSION_MINOR", minor),
                        ("EXPORT_SCHEMA_VERSION_MICRO", micro)):
        conn.execute(f"INSERT INTO {table} VALUES (?, ?)", (name, value))
    conn.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, ?, ?)",
                 (1_796_194_088_918_870_923, "2026-12-02T06:48:08", "2026-12-02T06:48:08"))
    conn.execute("INSERT INTO ANALYSIS_DETAILS VALUES (?, ?, ?, ?)", (VM, export.duration, 0, export.duration))
    for dev, name in export.gpus.items():
        _insert(conn, version, "TARGET_INFO_GPU", {"vmId": VM, "id": dev, "name": name, "cuDevice": dev,
                                                   "uuid": f"GPU-synthetic-{dev}", "smCount": 132})
    if version != "2022.4":    # 2022.4 exports these enums empty (its reports hard-code the names)
        for table, values in (("ENUM_CUDA_MEMCPY_OPER", MEMCPY_OPER), ("ENUM_CUDA_MEM_KIND", MEM_KIND)):
            for i, label in values.items():
                conn.execute(f"INSERT INTO {table} VALUES (?, ?, ?)", (i, label.upper(), label))


class _Strings:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.ids: dict[str, int] = {}

    def id(self, value: str) -> int:
        if value not in self.ids:
            self.ids[value] = len(self.ids) + 1
            self.conn.execute("INSERT INTO StringIds VALUES (?, ?)", (self.ids[value], value))
        return self.ids[value]


def _next(corr: dict[int, int], pid: int) -> int:
    corr[pid] = corr.get(pid, 0) + 1     # correlation ids count per process, as CUPTI's do
    return corr[pid]


def _ids(pid: int, device: int, start: int, end: int, stream: int, corr: int) -> dict:
    return {"start": start, "end": end, "deviceId": device, "contextId": 1 + device, "streamId": stream,
            "correlationId": corr, "globalPid": VM | pid << 24}


def _api(conn: sqlite3.Connection, version: str, strings: _Strings, pid: int, launch: int | None, corr: int,
         name: str) -> None:
    if launch is None:
        return
    _insert(conn, version, "CUPTI_ACTIVITY_KIND_RUNTIME", {
        "start": launch, "end": launch + 2_000, "eventClass": 0, "globalTid": VM | pid << 24 | pid,
        "correlationId": corr, "nameId": strings.id(name), "returnValue": 0})


def _insert(conn: sqlite3.Connection, version: str, table: str, row: dict) -> None:
    info = table_info(version)[table]
    unknown = set(row) - {c[0] for c in info}
    if unknown:
        raise KeyError(f"{table} of nsys {version} has no column(s) {sorted(unknown)}")
    values = [row.get(n, 0 if nn else None) for n, _, nn, _ in info]
    conn.execute(f"INSERT INTO {table} VALUES ({', '.join('?' * len(info))})", values)
