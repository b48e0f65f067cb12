"""gpuscope.telemetry"""
