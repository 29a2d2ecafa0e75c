"""A minimal WebSocket server (RFC 6455) on the standard library, for one client at a time: the
handshake, masked client frames of any length, binary replies, ping/pong and close. Enough for
PySC2's client (websocket-client), which sends protobuf bytes in TEXT frames: payloads are handed
over as bytes, never decoded as UTF-8."""

import base64
import hashlib
import socket
import struct

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TEXT, BINARY, CLOSE, PING, PONG, CONTINUATION = 1, 2, 8, 9, 10, 0


class Closed(Exception):
    """The client closed the connection (or it dropped)."""


def _read_exact(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise Closed("connection dropped")
        data += chunk
    return data


def handshake(conn, path):
    """Reads the HTTP upgrade request; answers 101 for `path`, 404 (and Closed) otherwise."""
    request = b""
    while b"\r\n\r\n" not in request:
        chunk = conn.recv(4096)
        if not chunk:
            raise Closed("connection dropped during the handshake")
        request += chunk
    lines = request.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    target = lines[0].split(" ")[1] if len(lines[0].split(" ")) > 1 else ""
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    key = headers.get("sec-websocket-key")
    if target != path or not key:
        conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        raise Closed(f"no WebSocket upgrade for {target!r}")
    accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
    conn.sendall(
        (
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {accept}\r\n\r\n"
        ).encode()
    )


def _frame(opcode, payload):
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
    return head + payload


def send(conn, payload, opcode=BINARY):
    conn.sendall(_frame(opcode, payload))


def receive(conn):
    """The next data message's payload (bytes); answers pings, raises Closed on a close frame."""
    message = b""
    while True:
        b0, b1 = _read_exact(conn, 2)
        opcode, fin = b0 & 0x0F, b0 & 0x80
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", _read_exact(conn, 2))[0]
        elif n == 127:
            n = struct.unpack("!Q", _read_exact(conn, 8))[0]
        mask = _read_exact(conn, 4) if b1 & 0x80 else b"\0\0\0\0"
        raw = _read_exact(conn, n)
        keys = (mask * (n // 4 + 1))[:n]
        data = (int.from_bytes(raw, "big") ^ int.from_bytes(keys, "big")).to_bytes(n, "big") if n else b""
        if opcode == CLOSE:
            try:
                send(conn, data[:2], CLOSE)
            except OSError:
                pass
            raise Closed("close frame")
        if opcode == PING:
            send(conn, data, PONG)
            continue
        if opcode == PONG:
            continue
        message += data
        if fin:
            return message


def serve(host, port, path, handle):
    """Accepts one client on host:port at `path` and answers each message with handle(bytes) ->
    bytes or None (None: no reply, and stop serving). Returns when handle says stop, or when
    the client closes."""
    with socket.create_server((host, port), reuse_port=False) as server:
        conn, _ = server.accept()
        with conn:
            handshake(conn, path)
            while True:
                try:
                    message = receive(conn)
                except (Closed, OSError):
                    return
                reply = handle(message)
                if reply is None:
                    return
                send(conn, reply)
