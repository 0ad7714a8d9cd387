"""The sandbox's end of the egress door: a loopback port that leads to the door's socket.

A bubblewrap sandbox has no network interface but its own loopback. This binds
``127.0.0.1:PORT`` there, leaves a child process relaying each connection to the door's Unix
socket (shown read-only in the sandbox), and execs the command: ``HTTP_PROXY`` and
``HTTPS_PROXY`` name the port. The port is bound before the command starts, so its first
request finds it. The relay dies with the sandbox (its pid namespace ends with the command).

Run as ``python -I forward.py PORT SOCKET -- ARGV...``; standard library only.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading


def pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


def relay(client: socket.socket, path: str) -> None:
    door = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        door.connect(path)
    except OSError:
        client.close()
        return
    threading.Thread(target=pipe, args=(door, client), daemon=True).start()
    pipe(client, door)


def serve(listener: socket.socket, path: str) -> None:
    while True:
        client, _ = listener.accept()
        # Small writes go at once: with Nagle's algorithm, a request written in two parts
        # waited for the delayed ACK of the first (40 ms on Linux), measured in bench/egress.py.
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=relay, args=(client, path), daemon=True).start()


def main() -> None:
    port, path, separator, *argv = sys.argv[1:]
    if separator != "--" or not argv:
        sys.exit("usage: forward.py PORT SOCKET -- ARGV...")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", int(port)))
    listener.listen(64)
    if os.fork() == 0:
        os.setsid()  # not in the command's process group: its signals are not ours
        try:
            serve(listener, path)
        finally:
            os._exit(0)
    listener.close()
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"toolbridge: cannot run {argv[0]!r}: {exc.strerror}\n")
        sys.exit(127)


if __name__ == "__main__":
    main()
