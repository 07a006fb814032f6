#!/usr/bin/env python3
"""A real SMTP server on loopback for Tenantry's tests (aiosmtpd, from PyPI).

Every message it accepts is written to DIR as NNNNN.eml (the envelope's sender and recipients
as X-Envelope-From / X-Envelope-To headers, then the message as received), renamed into place
only once complete, so a reader never sees half a message. With --user and --password it
requires SMTP AUTH (PLAIN or LOGIN) and refuses other credentials with 535. It prints
"listening on HOST:PORT" once it accepts connections, and runs until it is killed.

    scripts/smtp-sink.py --dir /tmp/mail [--host 127.0.0.1] [--port 0] [--user U --password P]
"""

import argparse
import os
import signal
import socket
import sys
import threading
import warnings

# Loopback only: AUTH without TLS is what the tests exercise, not a deployment.
warnings.filterwarnings("ignore", message="Requiring AUTH while not requiring TLS")

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


class SaveToDir:
    def __init__(self, directory):
        self.directory = directory
        self.count = 0
        self.lock = threading.Lock()

    async def handle_DATA(self, server, session, envelope):
        with self.lock:
            self.count += 1
            name = os.path.join(self.directory, f"{self.count:05d}.eml")
        with open(name + ".part", "wb") as f:
            f.write(f"X-Envelope-From: {envelope.mail_from}\r\n".encode())
            f.write(f"X-Envelope-To: {','.join(envelope.rcpt_tos)}\r\n".encode())
            f.write(envelope.original_content)
        os.rename(name + ".part", name)
        return "250 2.0.0 OK: saved"


class Accounts:
    def __init__(self, user, password):
        self.user = user.encode()
        self.password = password.encode()

    def __call__(self, server, session, envelope, mechanism, auth_data):
        ok = isinstance(auth_data, LoginPassword) and (auth_data.login, auth_data.password) == (
            self.user,
            self.password,
        )
        return AuthResult(success=ok, handled=False)


def free_port(host):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0: a free port")
    p.add_argument("--user")
    p.add_argument("--password")
    args = p.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    port = args.port or free_port(args.host)
    auth = {}
    if args.user is not None:
        auth = {
            "authenticator": Accounts(args.user, args.password or ""),
            "auth_required": True,
            # Loopback only: the tests' credentials cross no network.
            "auth_require_tls": False,
        }
    controller = Controller(SaveToDir(args.dir), hostname=args.host, port=port, **auth)
    controller.start()
    print(f"listening on {args.host}:{port}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    controller.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
