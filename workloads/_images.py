"""Deterministic test images: a seeded pattern written as PNG by hand, sent as a data URL.

The PNG is a pure function of (width, height, seed): the pixels come from numpy's seeded
generator (soft gradients plus a few seeded rectangles, so a vision encoder sees shapes, not
white noise) and the zlib stream is written with *stored* (uncompressed) deflate blocks, so the
bytes do not depend on the zlib version installed. The price is size: a 512x512 image is about
768 KiB, 1 MiB as base64. The request set records only (width, height, seed); the bytes are
made when requests are built, and their sha256 is recorded per request.
"""

from __future__ import annotations

import base64
import struct
import zlib

import numpy as np

__all__ = ["png_bytes", "data_url"]

_STORED_MAX = 65535


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def _stored_zlib(raw: bytes) -> bytes:
    """A zlib stream of stored deflate blocks (RFC 1950/1951): deterministic by construction."""
    out = bytearray(b"\x78\x01")
    for start in range(0, max(len(raw), 1), _STORED_MAX):
        block = raw[start:start + _STORED_MAX]
        final = 1 if start + _STORED_MAX >= len(raw) else 0
        out += bytes([final]) + struct.pack("<HH", len(block), len(block) ^ 0xFFFF) + block
    out += struct.pack(">I", zlib.adler32(raw) & 0xFFFFFFFF)
    return bytes(out)


def _pixels(width: int, height: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    base = rng.uniform(40, 215, size=3)
    slope = rng.uniform(-60, 60, size=(3, 2))
    img = (base[None, None, :] + (x[..., None] / max(width, 1)) * slope[:, 0]
           + (y[..., None] / max(height, 1)) * slope[:, 1])
    for _ in range(int(rng.integers(3, 9))):
        x0, x1 = sorted(rng.integers(0, width + 1, size=2).tolist())
        y0, y1 = sorted(rng.integers(0, height + 1, size=2).tolist())
        img[y0:y1, x0:x1, :] = rng.uniform(0, 255, size=3)
    out: np.ndarray = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    return out


def png_bytes(width: int, height: int, seed: int) -> bytes:
    """An RGB PNG of `width` x `height` pixels, the same bytes for the same arguments."""
    pixels = _pixels(width, height, seed)
    rows = np.concatenate([np.zeros((height, 1), np.uint8), pixels.reshape(height, width * 3)], axis=1)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", _stored_zlib(rows.tobytes()))
            + _chunk(b"IEND", b""))


def data_url(width: int, height: int, seed: int) -> str:
    """The PNG as a `data:image/png;base64,...` URL."""
    return "data:image/png;base64," + base64.b64encode(png_bytes(width, height, seed)).decode()
