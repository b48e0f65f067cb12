"""Qt-free view models: the core's data shaped for display (timeline level of detail and text,
live series and process rows, process roles, a past run, leftovers, launch checks).

Nothing here imports Qt; the app's widgets in ``gpuscope.app`` draw what these compute, and their
tests run without a display.
"""
