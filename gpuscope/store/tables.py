"""The run store's tables: every table family's DDL and the columns added since, in one place.

The store's schema version is a checksum of these texts (:func:`gpuscope.store.schema.schema_version`),
so opening the store reads them here, without the modules that read and write each family's rows
(``runs``, ``samples``, ``cleanup_log``: a run does not load the clean-up log's to open the store).
"""

RUNS = """
CREATE TABLE IF NOT EXISTS runs (
    id           TEXT PRIMARY KEY,
    created_ns   INTEGER NOT NULL,
    started_ns   INTEGER,
    ended_ns     INTEGER,
    status       TEXT NOT NULL,          -- running | exited | failed | stopped | error
    exit_code    INTEGER,
    signal       TEXT,
    script       TEXT NOT NULL,
    launcher     TEXT NOT NULL,
    start_method TEXT NOT NULL,
    run_dir      TEXT NOT NULL,
    spec_json    TEXT NOT NULL,
    versions_json TEXT,
    error        TEXT,
    summary_json TEXT,                -- written by older versions only: summary.json holds it
    supervisor_pid INTEGER,           -- the gpuscope process that runs it
    supervisor_start INTEGER          -- its start time (clock ticks after boot, /proc/<pid>/stat)
);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created_ns);
CREATE TABLE IF NOT EXISTS run_processes (
    run_id       TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    pid          INTEGER NOT NULL,
    ppid         INTEGER,
    role         TEXT,
    start_method TEXT,
    rank         INTEGER,
    name         TEXT,
    started_ns   INTEGER,
    ended_ns     INTEGER,
    exit_code    INTEGER,
    ranges       INTEGER NOT NULL DEFAULT 0,
    info_json    TEXT,
    PRIMARY KEY (run_id, pid)
);
"""

# (table, column, declaration) added since the first schema; db.connect adds them to older stores.
RUNS_ADDED_COLUMNS = (
    ("runs", "supervisor_pid", "INTEGER"),
    ("runs", "supervisor_start", "INTEGER"),
)

SAMPLES = """
CREATE TABLE IF NOT EXISTS sample_series (
    key            INTEGER PRIMARY KEY,
    run_id         TEXT NOT NULL UNIQUE,
    interval_s     REAL NOT NULL,
    anchor_mono_ns INTEGER NOT NULL,
    anchor_wall_ns INTEGER NOT NULL,
    root_pid       INTEGER,
    info_json      TEXT,
    notes_json     TEXT NOT NULL DEFAULT '[]'
);
CREATE TABLE IF NOT EXISTS sample_host (
    series INTEGER NOT NULL, t_ns INTEGER NOT NULL,
    cpu REAL, mem_used INTEGER, mem_total INTEGER, swap_used INTEGER, swap_total INTEGER,
    cores BLOB,                                  -- float32 per core, %
    PRIMARY KEY (series, t_ns)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sample_gpu (
    series INTEGER NOT NULL, device INTEGER NOT NULL, t_ns INTEGER NOT NULL,
    util_gpu REAL, util_mem REAL, mem_used INTEGER, mem_total INTEGER,
    temperature REAL, power_w REAL, sm_clock INTEGER,
    PRIMARY KEY (series, device, t_ns)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sample_proc (
    series INTEGER NOT NULL, pid INTEGER NOT NULL, t_ns INTEGER NOT NULL,
    state TEXT, cpu REAL, rss INTEGER, uss INTEGER, threads INTEGER, gpu_mem INTEGER, sm_util REAL,
    PRIMARY KEY (series, pid, t_ns)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sample_gpu_proc (
    series INTEGER NOT NULL, pid INTEGER NOT NULL, device INTEGER NOT NULL, t_ns INTEGER NOT NULL,
    used_memory_bytes INTEGER, sm_util REAL,
    PRIMARY KEY (series, pid, device, t_ns)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sample_procs (
    series INTEGER NOT NULL, pid INTEGER NOT NULL,
    ppid INTEGER, name TEXT, cmdline_json TEXT, create_time REAL,
    first_seen_ns INTEGER, last_seen_ns INTEGER, state TEXT, alive INTEGER, via TEXT,
    escaped TEXT, orphaned INTEGER, cpu_seconds REAL, peak_rss_bytes INTEGER,
    peak_gpu_mem_bytes INTEGER, uss_bytes INTEGER,
    PRIMARY KEY (series, pid)
) WITHOUT ROWID;
"""

CLEANUP_ACTIONS = """
CREATE TABLE IF NOT EXISTS cleanup_actions (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    time_ns       INTEGER NOT NULL,
    action        TEXT NOT NULL,     -- terminate | kill | signal-parent | unlink
    target        TEXT NOT NULL,     -- "pid 123" | "/dev/shm/psm_x"
    pid           INTEGER,
    identity_json TEXT NOT NULL,     -- {"pid", "create_time"} or {"name", "dev", "ino"}
    result        TEXT NOT NULL,     -- done | gone | refused | failed | advice | not-reaped
    ok            INTEGER NOT NULL,
    message       TEXT NOT NULL,
    user          TEXT NOT NULL,
    run_id        TEXT,              -- the gpuscope run the target came from, if any
    details_json  TEXT
);
CREATE INDEX IF NOT EXISTS cleanup_actions_time ON cleanup_actions(time_ns);
"""

# (DDL, added columns) per family, in the order they are applied (runs first: foreign keys)
FAMILIES = ((RUNS, RUNS_ADDED_COLUMNS), (SAMPLES, ()), (CLEANUP_ACTIONS, ()))
