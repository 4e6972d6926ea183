"""Screenshots of `ziggurat viz` pages with headless Chromium, and the small PNG codec they need.

`screenshot(html, png)` runs `chromium --headless --screenshot` (the binary from
`find_chromium`: chromium, chromium-browser, google-chrome, or $ZIGGURAT_CHROMIUM).
`decode_png` / `encode_png` read and write 8-bit, non-interlaced PNGs with zlib
and numpy alone (the tests check the kernel colours in the screenshot; the docs
images are shrunk with `shrink_png` to stay small).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import numpy as np

from ziggurat.errors import ZigguratError

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def find_chromium() -> str | None:
    """The headless-capable browser to use, or None when none is installed."""
    env = os.environ.get("ZIGGURAT_CHROMIUM")
    if env:
        return shutil.which(env) or (env if Path(env).is_file() else None)
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


def screenshot(html_path: str | os.PathLike, png_path: str | os.PathLike, width: int = 1400, height: int = 1000,
               browser: str | None = None, timeout: float = 120.0) -> Path:
    """Renders the page at `html_path` in headless Chromium at `width` x `height` CSS pixels into `png_path`."""
    browser = browser or find_chromium()
    if browser is None:
        raise ZigguratError("no Chromium found (chromium, chromium-browser or google-chrome on PATH, or "
                            "ZIGGURAT_CHROMIUM); install it (apt-get install chromium) or write .html/.svg instead")
    png = Path(png_path).resolve()
    with tempfile.TemporaryDirectory(prefix="ziggurat-viz-") as profile:
        cmd = [browser, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
               f"--user-data-dir={profile}", f"--screenshot={png}", f"--window-size={width},{height}",
               Path(html_path).resolve().as_uri()]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ZigguratError(f"{browser} did not finish the screenshot in {timeout:.0f} s") from None
    if proc.returncode != 0 or not png.is_file():
        raise ZigguratError(f"{browser} failed to write {png} (status {proc.returncode}): "
                            f"{proc.stderr.strip().splitlines()[-1:] or ''}")
    return png


def _chunks(data: bytes):
    if not data.startswith(_SIGNATURE):
        raise ZigguratError("not a PNG file")
    pos = len(_SIGNATURE)
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        yield kind, data[pos + 8:pos + 8 + length]
        pos += 12 + length


def _unfilter(raw: bytes, height: int, stride: int, bpp: int) -> np.ndarray:
    rows = np.frombuffer(raw, np.uint8)[: height * (stride + 1)].reshape(height, stride + 1)
    out = np.zeros((height, stride), np.uint8)
    prev = np.zeros(stride, np.uint8)
    for y in range(height):
        kind, line = rows[y, 0], rows[y, 1:]
        if kind == 0:
            cur = line.copy()
        elif kind == 1:  # Sub: a running sum per channel
            cur = (np.cumsum(line.reshape(-1, bpp).astype(np.int64), axis=0) % 256).astype(np.uint8).ravel()
        elif kind == 2:  # Up
            cur = line + prev
        else:  # Average, Paeth: sequential along the row
            c, up = [0] * stride, prev.tolist()
            src = line.tolist()
            for i in range(stride):
                left = c[i - bpp] if i >= bpp else 0
                if kind == 3:
                    c[i] = (src[i] + ((left + up[i]) >> 1)) & 255
                else:
                    ul = up[i - bpp] if i >= bpp else 0
                    p = left + up[i] - ul
                    pa, pb, pc = abs(p - left), abs(p - up[i]), abs(p - ul)
                    pred = left if pa <= pb and pa <= pc else (up[i] if pb <= pc else ul)
                    c[i] = (src[i] + pred) & 255
            cur = np.array(c, np.uint8)
        out[y], prev = cur, cur
    return out


def decode_png(data: bytes) -> np.ndarray:
    """An 8-bit non-interlaced PNG as a (height, width, 3 or 4) uint8 array (grey and palette
    images expanded to RGB)."""
    header, palette, idat = None, None, []
    for kind, body in _chunks(data):
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"PLTE":
            palette = np.frombuffer(body, np.uint8).reshape(-1, 3)
        elif kind == b"IDAT":
            idat.append(body)
    if header is None:
        raise ZigguratError("PNG without IHDR")
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or interlace != 0 or colour not in _CHANNELS:
        raise ZigguratError(f"unsupported PNG: bit depth {depth}, colour type {colour}, interlace {interlace}")
    ch = _CHANNELS[colour]
    img = _unfilter(zlib.decompress(b"".join(idat)), height, width * ch, ch).reshape(height, width, ch)
    if colour == 3:
        return palette[img[..., 0]]
    if colour in (0, 4):
        return np.repeat(img[..., :1], 3, axis=2)
    return img


def encode_png(img: np.ndarray) -> bytes:
    """An RGB(A) uint8 array as PNG (per row the cheaper of the None, Sub and Up filters; zlib level 9)."""
    height, width, ch = img.shape
    flat = img.reshape(height, width * ch).astype(np.int16)
    up = np.vstack([np.zeros((1, width * ch), np.int16), flat[:-1]])
    left = np.hstack([np.zeros((height, ch), np.int16), flat[:, :-ch]])
    options = [flat % 256, (flat - left) % 256, (flat - up) % 256]
    score = np.stack([np.abs(np.where(o > 127, o - 256, o)).sum(axis=1) for o in options])
    best = score.argmin(axis=0)
    rows = np.empty((height, width * ch + 1), np.uint8)
    rows[:, 0] = best
    for kind in range(3):
        sel = best == kind
        rows[sel, 1:] = options[kind][sel]
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, {3: 2, 4: 6}[ch], 0, 0, 0)
    return _SIGNATURE + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows.tobytes(), 9)) + chunk(b"IEND", b"")


def shrink_png(path: str | os.PathLike, max_bytes: int = 300_000) -> int:
    """Rewrites the PNG at `path` as RGB, halving its size by 2x2 averaging until it is at most
    `max_bytes`; returns the final size."""
    p = Path(path)
    img = decode_png(p.read_bytes())[..., :3]
    data = encode_png(np.ascontiguousarray(img))
    while len(data) > max_bytes and min(img.shape[:2]) > 200:
        h, w = img.shape[0] // 2 * 2, img.shape[1] // 2 * 2
        img = img[:h, :w].reshape(h // 2, 2, w // 2, 2, 3).mean(axis=(1, 3)).round().astype(np.uint8)
        data = encode_png(img)
    if len(data) < p.stat().st_size or p.stat().st_size > max_bytes:
        p.write_bytes(data)
    return p.stat().st_size
