"""Serve a gateway whose Recorder is a JsonlRecorder, so another process can count what was recorded.

The load benchmark needs "recorded" counted outside the gateway process. Until the SQL
store lands there is no config key for the recorder (deliberately: ``store.backend: jsonl``
would outlive its use), so this entry point passes one through the ``create_app(recorder=)``
seam. Once ``SqlRecorder`` exists, ``load_faults`` should count rows in the store instead.

    python -m benchmarks.serve_recorded --config cfg.yaml --port 8000 --records records.jsonl
"""

from __future__ import annotations

import click
import uvicorn

from gateway.api.app import create_app
from gateway.config import load_settings
from gateway.store.jsonl_recorder import JsonlRecorder


@click.command()
@click.option("--config", "config_path", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--port", required=True, type=int)
@click.option("--records", required=True, type=click.Path(dir_okay=False), help="JSONL file the recorder appends to.")
def main(config_path: str, port: int, records: str) -> None:
    """Run one gateway worker on 127.0.0.1:PORT, recording every request to RECORDS."""
    app = create_app(load_settings(config_path), recorder=JsonlRecorder(records))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
