"""Deterministic audio clips: a speech-like signal written as 16-bit mono WAV by hand.

A clip is a pure function of (duration in ms, seed): syllable-length bursts (80-300 ms) of a
voiced sound (a seeded pitch of 90-250 Hz with its first harmonics, shaped by two formant-like
resonances and an amplitude envelope) separated by short pauses, at 16 kHz, the rate ASR models
take. It carries no words: it exercises an ASR server's audio front end and decoder with a
known duration, not its accuracy (the transcript canary takes a clip and its text from you).
The request set records only (duration_ms, seed) or a file's path; bytes are made when requests
are built. `wav_duration_ms` reads a WAV's duration from its header (a user's file).
"""

from __future__ import annotations

import struct

import numpy as np

__all__ = ["SAMPLE_RATE_HZ", "wav_bytes", "wav_duration_ms", "speechlike_clip"]

SAMPLE_RATE_HZ = 16_000


def wav_bytes(samples: np.ndarray, rate_hz: int = SAMPLE_RATE_HZ) -> bytes:
    """A PCM16 mono WAV of `samples` (floats in -1..1)."""
    pcm = bytes((np.clip(samples, -1.0, 1.0) * 32767).astype("<i2").tobytes())
    header = struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + len(pcm), b"WAVE", b"fmt ", 16, 1, 1, rate_hz,
                         rate_hz * 2, 2, 16, b"data", len(pcm))
    return header + pcm


def speechlike_clip(duration_ms: int, seed: int) -> bytes:
    """A WAV of exactly `duration_ms` (to the sample) of syllable-like voiced bursts."""
    rng = np.random.default_rng(seed)
    n = SAMPLE_RATE_HZ * duration_ms // 1000
    out = np.zeros(n)
    pitch = rng.uniform(90, 250)
    at = int(rng.integers(0, SAMPLE_RATE_HZ // 10 + 1))
    while at < n:
        length = int(rng.uniform(0.08, 0.30) * SAMPLE_RATE_HZ)
        t = np.arange(min(length, n - at)) / SAMPLE_RATE_HZ
        f0 = pitch * (1 + 0.05 * np.sin(2 * np.pi * rng.uniform(2, 5) * t))
        phase = 2 * np.pi * np.cumsum(f0) / SAMPLE_RATE_HZ
        formants = rng.uniform([300, 900], [900, 2500])
        burst = sum(np.sin(k * phase) / k * (1.0 + 0.8 * np.exp(-((k * pitch - formants[0]) / 200) ** 2)
                                             + 0.5 * np.exp(-((k * pitch - formants[1]) / 300) ** 2))
                    for k in range(1, 9))
        envelope = np.sin(np.pi * np.arange(len(t)) / max(len(t), 1)) ** 2
        out[at:at + len(t)] = 0.3 * burst * envelope / 3.0
        at += length + int(rng.uniform(0.03, 0.15) * SAMPLE_RATE_HZ)
        pitch = float(np.clip(pitch * rng.uniform(0.9, 1.1), 80, 260))
    return wav_bytes(out)


def wav_duration_ms(data: bytes) -> int:
    """A WAV's duration from its `fmt ` and `data` chunks; ValueError when it is not a PCM WAV."""
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise ValueError("not a RIFF/WAVE file")
    at, byte_rate, data_bytes = 12, None, None
    while at + 8 <= len(data):
        kind, size = data[at:at + 4], struct.unpack("<I", data[at + 4:at + 8])[0]
        if kind == b"fmt " and size >= 16:
            byte_rate = struct.unpack("<I", data[at + 16:at + 20])[0]
        elif kind == b"data":
            data_bytes = min(size, len(data) - at - 8)
            break
        at += 8 + size + (size & 1)
    if not byte_rate or data_bytes is None:
        raise ValueError("a WAV without a fmt chunk with a byte rate, or without data")
    return int(data_bytes * 1000 // byte_rate)
