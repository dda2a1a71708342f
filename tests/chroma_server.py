"""A real Chroma server (`chroma run`, shipped with chromadb) on 127.0.0.1 for the client/server tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import closing
from pathlib import Path


def free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ChromaServer:
    def __init__(self, path: Path, port: int | None = None) -> None:
        self.path = path
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> ChromaServer:
        chroma = Path(sys.executable).with_name("chroma")
        env = dict(os.environ, ANONYMIZED_TELEMETRY="False")
        self.proc = subprocess.Popen(
            [str(chroma), "run", "--path", str(self.path), "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chroma server exited with {self.proc.returncode}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=1):
                    return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("chroma server did not start in time")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None
