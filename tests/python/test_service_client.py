# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""joule.BatchSizeClient's kept-alive connection against a loopback server
that closes a connection under a request: what is sent again, and what is
not (the C++ client's rules, tests/service/client_test.cc)."""
import socket
import threading
import time

import pytest

import joule


class ScriptedServer:
    """HTTP/1.1 on a loopback port. Connection k answers its requests by
    scripts[k], in order: "ok" answers 200 with {} and keeps the connection,
    "drop" reads the request and closes without an answer. Every request
    read is kept as (connection, method, path)."""

    def __init__(self, scripts):
        self.scripts = scripts
        self.requests = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(10.0)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        for k, script in enumerate(self.scripts):
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with conn, conn.makefile("rb") as reader:
                for action in script:
                    request = self._read_request(reader)
                    if request is None:  # the client closed it
                        break
                    self.requests.append((k, *request))
                    if action == "drop":
                        break
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
                else:
                    reader.read(1)  # the client closes it (or the test ends)

    @staticmethod
    def _read_request(reader):
        first = reader.readline()
        if not first:
            return None
        method, path, _ = first.decode().split(" ", 2)
        length = 0
        while (line := reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        reader.read(length)
        return method, path

    def close(self):
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes a waiting accept()
        except OSError:
            pass
        self._listener.close()
        self._thread.join(timeout=5.0)


@pytest.fixture
def scripted():
    servers = []

    def make(scripts):
        servers.append(ScriptedServer(scripts))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def test_a_get_whose_connection_broke_under_it_is_sent_once_more(scripted):
    server = scripted([["ok", "drop"], ["ok"]])
    with joule.BatchSizeClient(server.url, timeout_s=5.0) as client:
        client.health()
        assert client.job("bert") == {}  # answered on the second connection
    assert server.requests == [(0, "GET", "/healthz"), (0, "GET", "/v1/jobs/bert"), (1, "GET", "/v1/jobs/bert")]


def test_a_post_whose_connection_broke_under_it_is_not_sent_again(scripted):
    server = scripted([["ok", "drop"], ["ok"]])
    with joule.BatchSizeClient(server.url, timeout_s=5.0) as client:
        client.health()
        with pytest.raises(joule.ServiceError, match=r"POST .*/v1/recurrences/7/result: no answer"):
            client.report(7, energy_j=100.0, time_s=10.0, reached_target=True)
    assert server.requests == [(0, "GET", "/healthz"), (0, "POST", "/v1/recurrences/7/result")]


def test_a_connection_idle_for_over_a_second_is_not_reused(scripted):
    server = scripted([["ok", "ok", "ok"], ["ok"]])  # the first would answer a third
    with joule.BatchSizeClient(server.url, timeout_s=5.0) as client:
        client.health()
        client.health()  # at once: the same connection
        time.sleep(1.2)
        client.health()
    assert [k for k, _, _ in server.requests] == [0, 0, 1]
