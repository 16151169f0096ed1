"""A real local S3-compatible server for tests: moto's server mode (``moto_server``) as a
child process on a free port, with a bucket, and the settings that point archiving at it."""

import sys
import time
from pathlib import Path

import boto3
import requests

from .processes import Process, free_port

CREDENTIALS = {"aws_access_key_id": "test-only", "aws_secret_access_key": "test-only-secret"}


class MotoServer:
    def __init__(self, log_dir, port=None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = Process([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1",
                                "-p", str(self.port)], None, Path(log_dir) / f"moto-{self.port}.log")
        self._wait_ready()

    def _wait_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.popen.poll() is not None:
                raise RuntimeError(f"moto_server exited: {self.process.output()}")
            try:
                requests.get(self.url, timeout=5)
                return
            except requests.RequestException:  # not listening yet, or still importing
                time.sleep(0.1)
        raise RuntimeError(f"moto_server did not answer on {self.url}: {self.process.output()}")

    def client(self):
        return boto3.client("s3", endpoint_url=self.url, region_name="us-east-1", **CREDENTIALS)

    def create_bucket(self, name):
        self.client().create_bucket(Bucket=name)

    def kill(self):
        """SIGKILL: the object store is gone mid-way, as a crashed or unreachable one."""
        self.process.kill()
        self.process.popen.wait(10)

    def stop(self):
        self.process.stop()


def archive_settings(settings, server, bucket):
    settings.ARCHIVE_S3_BUCKET = bucket
    settings.ARCHIVE_S3_ENDPOINT_URL = server.url
    settings.ARCHIVE_S3_REGION = "us-east-1"
    settings.ARCHIVE_S3_ACCESS_KEY_ID = CREDENTIALS["aws_access_key_id"]
    settings.ARCHIVE_S3_SECRET_ACCESS_KEY = CREDENTIALS["aws_secret_access_key"]
    settings.ARCHIVE_S3_ADDRESSING_STYLE = "path"
    settings.ARCHIVE_S3_TIMEOUT_SECONDS = 2.0
