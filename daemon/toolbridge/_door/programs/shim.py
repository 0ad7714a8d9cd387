"""A shimmed program inside the sandbox: its argv, stdin and declared variables to the host's
door, and the answer's output and exit code back, as they come.

Run by the sandbox runtime's Python (``python -I shim.py TOOL VARIABLES ARGS...``) from the
script the door writes on the command's PATH. Standard library only: it must work in every
sandbox the daemon starts, for Python and Node commands alike.

Frames, both ways: one kind byte, a 4-byte big-endian length, the payload.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys

HELLO, STDIN, STDIN_END, STDOUT, STDERR, EXIT = b"H", b"I", b"i", b"O", b"E", b"X"
HEADER = struct.Struct(">cI")
CHUNK = 64 * 1024


def send(sock: socket.socket, kind: bytes, payload: bytes) -> None:
    sock.sendall(HEADER.pack(kind, len(payload)) + payload)


def receive_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return bytes(data)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BrokenPipeError:
            return


def main() -> int:
    tool, variables, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
    try:
        path, token = os.environ["TOOLBRIDGE_DOOR"], os.environ["TOOLBRIDGE_DOOR_TOKEN"]
    except KeyError:
        sys.stderr.write(f"{tool}: toolbridge: this program runs only in the command it was given to\n")
        return 127
    env = {name: os.environ[name] for name in variables.split(",") if name and name in os.environ}
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = ""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as exc:
        sys.stderr.write(f"{tool}: toolbridge: cannot reach the host: {exc}\n")
        return 127
    hello = {"token": token, "tool": tool, "argv": argv, "cwd": cwd, "env": env}
    send(sock, HELLO, json.dumps(hello).encode())
    try:
        while chunk := os.read(0, CHUNK):
            send(sock, STDIN, chunk)
    except OSError:
        pass  # no stdin (closed): nothing to send
    send(sock, STDIN_END, b"")
    try:
        while True:
            kind, size = HEADER.unpack(receive_exactly(sock, HEADER.size))
            payload = receive_exactly(sock, size)
            if kind == STDOUT:
                write_all(1, payload)
            elif kind == STDERR:
                write_all(2, payload)
            elif kind == EXIT:
                return int(json.loads(payload)["code"])
    except (EOFError, OSError):
        sys.stderr.write(f"{tool}: toolbridge: the host closed the connection\n")
        return 125


if __name__ == "__main__":
    sys.exit(main())
