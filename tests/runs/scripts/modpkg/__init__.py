"""A package run with `gpuscope run -m modpkg.<module>` (tests/runs/test_module_runs.py)."""
