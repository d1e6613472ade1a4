"""A grouped bar chart as a PNG, in pure Python (zlib + struct): no plotting dependency.

The chart carries digits only (a 3×5 pixel font for axis ticks and category
numbers); which colour is which system is written in the markdown report and
returned by ``bar_chart`` so the caller can print a legend.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping, Sequence

Color = tuple[int, int, int]
PALETTE: tuple[Color, ...] = (
    (31, 119, 180),  # blue
    (255, 127, 14),  # orange
    (44, 160, 44),  # green
    (214, 39, 40),  # red
    (148, 103, 189),  # purple
)
WHITE, BLACK, GREY = (255, 255, 255), (0, 0, 0), (220, 220, 220)

# 3×5 digits, one string per row, "#" = ink.
_GLYPHS = {
    "0": ("###", "#.#", "#.#", "#.#", "###"),
    "1": (".#.", "##.", ".#.", ".#.", "###"),
    "2": ("###", "..#", "###", "#..", "###"),
    "3": ("###", "..#", "###", "..#", "###"),
    "4": ("#.#", "#.#", "###", "..#", "..#"),
    "5": ("###", "#..", "###", "..#", "###"),
    "6": ("###", "#..", "###", "#.#", "###"),
    "7": ("###", "..#", "..#", "..#", "..#"),
    "8": ("###", "#.#", "###", "#.#", "###"),
    "9": ("###", "#.#", "###", "..#", "###"),
    ".": ("...", "...", "...", "...", ".#."),
}


class Canvas:
    """An RGB pixel grid that can fill rectangles, draw digits and encode itself as PNG."""

    def __init__(self, width: int, height: int, background: Color = WHITE) -> None:
        self.width, self.height = width, height
        self.rows = [bytearray(bytes(background) * width) for _ in range(height)]

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        """Fill [x0, x1) × [y0, y1), clipped to the canvas."""
        x0, x1 = max(0, min(x0, x1)), min(self.width, max(x0, x1))
        y0, y1 = max(0, min(y0, y1)), min(self.height, max(y0, y1))
        for y in range(y0, y1):
            self.rows[y][3 * x0 : 3 * x1] = bytes(color) * (x1 - x0)

    def text(self, x: int, y: int, s: str, color: Color = BLACK, scale: int = 2) -> None:
        """Digits and dots at (x, y), top-left, each glyph 3×5 pixels times ``scale``."""
        for i, ch in enumerate(s):
            for row, line in enumerate(_GLYPHS.get(ch, ())):
                for col, ink in enumerate(line):
                    if ink == "#":
                        px, py = x + (4 * i + col) * scale, y + row * scale
                        self.rect(px, py, px + scale, py + scale, color)

    def png(self) -> bytes:
        """The canvas as a PNG file (8-bit RGB, no filtering)."""
        raw = b"".join(b"\x00" + bytes(r) for r in self.rows)
        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return (
            b"\x89PNG\r\n\x1a\n"
            + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(raw, 9))
            + _chunk(b"IEND", b"")
        )


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def bar_chart(
    groups: Sequence[str],
    series: Mapping[str, Mapping[str, float]],
    *,
    width: int = 720,
    height: int = 360,
    ymax: float = 1.0,
) -> tuple[bytes, dict[str, Color]]:
    """PNG bytes of ``series`` (name → group → value in 0..ymax) as grouped bars, and colours."""
    canvas = Canvas(width, height)
    left, right, top, bottom = 50, 10, 10, 30
    plot_w, plot_h = width - left - right, height - top - bottom
    for i in range(6):  # gridlines and ticks at 0, 0.2, ..., 1.0 of ymax
        y = top + plot_h - round(plot_h * i / 5)
        canvas.rect(left, y, left + plot_w, y + 1, GREY)
        canvas.text(4, max(0, y - 5), f"{ymax * i / 5:.1f}")
    colors = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(series)}
    slot = plot_w / max(1, len(groups))
    bar = max(1, int(slot * 0.8 / max(1, len(series))))
    for g, group in enumerate(groups):
        x0 = left + int(g * slot + slot * 0.1)
        for s, (name, values) in enumerate(series.items()):
            value = max(0.0, min(ymax, float(values.get(group, 0.0))))
            h = round(plot_h * value / ymax) if ymax else 0
            bx = x0 + s * bar
            canvas.rect(bx, top + plot_h - h, bx + bar - 1, top + plot_h, colors[name])
        canvas.text(left + int(g * slot + slot / 2) - 3, height - bottom + 8, group)
    canvas.rect(left, top, left + 1, top + plot_h + 1, BLACK)
    canvas.rect(left, top + plot_h, left + plot_w, top + plot_h + 1, BLACK)
    return canvas.png(), colors
