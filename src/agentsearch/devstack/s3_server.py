"""A real S3 protocol server for the objects source's tests and ``agentsearch bench sources --kind objects``:
moto's server (``moto_server``, from ``moto[server]``, the ``test`` extra) in a process of its own on a free loopback
port, with authentication on: it checks each request's signature against the access keys its IAM holds, so wrong
keys are refused as AWS refuses them.

Usage::

    with S3Server() as s3:
        client = s3.client()                      # boto3, with the keys of a user allowed s3:*
        client.put_object(Bucket="b", Key="k", Body=b"...")
        s3.access_key, s3.secret_key, s3.url
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentsearch.devstack.processes import free_port, listening, wait_for

# The requests made before authentication is enforced: the IAM user, its key and its policy.
SETUP_ACTIONS = 3


class S3Server:
    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.access_key = self.secret_key = ""

    def __enter__(self) -> S3Server:
        server = Path(sys.executable).with_name("moto_server")
        env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(SETUP_ACTIONS)}
        self.proc = subprocess.Popen([str(server), "-H", "127.0.0.1", "-p", str(self.port)], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: listening(self.port), 30, "moto_server", self.proc)
        iam = self._boto("iam", "setup", "setup")
        iam.create_user(UserName="reader")
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        iam.put_user_policy(UserName="reader", PolicyName="all", PolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        self.access_key, self.secret_key = key["AccessKeyId"], key["SecretAccessKey"]
        return self

    def _boto(self, service: str, access_key: str, secret_key: str) -> Any:
        import boto3

        return boto3.session.Session().client(service, endpoint_url=self.url, region_name="us-east-1",
                                              aws_access_key_id=access_key, aws_secret_access_key=secret_key)

    def client(self) -> Any:
        return self._boto("s3", self.access_key, self.secret_key)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(15)

    def __exit__(self, *exc: object) -> None:
        self.stop()
