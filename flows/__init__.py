"""The Prefect flows. Importing this package (before Prefect itself) sets firstfault's defaults for Prefect, so the
temporary server Prefect starts when no PREFECT_API_URL is set neither phones home nor logs tracebacks on runs that
succeed: its telemetry heartbeat fails with `database is locked` against the server's busy SQLite file, and with
"Failed to send telemetry" wherever there is no Internet. A value the user exported wins."""
import os

PREFECT_DEFAULTS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",  # the server's telemetry heartbeat
    "DO_NOT_TRACK": "1",                          # the SDK's usage events
    "PREFECT_SERVER_REGISTER_BLOCKS_ON_START": "false",  # a temporary server needs no block catalogue: faster start
}
for _name, _value in PREFECT_DEFAULTS.items():
    os.environ.setdefault(_name, _value)
