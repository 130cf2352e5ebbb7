"""Numbers typed on a command line: the readers the ``fused-quant`` command and the scripts of benchmarks/ share,
so that a count is read, and refused, in one way and one wording everywhere."""

from __future__ import annotations

import argparse


def whole_numbers(text: str, what: str, most: int | None = None, allowed=()) -> tuple[int, ...]:
    """Whole numbers >= 1 separated by commas, in the order given, each once: at most ``most`` and one of
    ``allowed`` where given. Anything else raises ``argparse.ArgumentTypeError`` naming ``what`` was expected and
    what came; every flag that takes counts reads them through it."""
    counts = []
    for part in text.split(","):
        part = part.strip()
        if (not _digits(part) or int(part) < 1 or (most and int(part) > most)
                or (allowed and int(part) not in allowed)):
            bound = f" (at most {most})" if most else ""
            among = f", each one of {', '.join(map(str, allowed))}" if allowed else " (like 1,16,224)"
            raise argparse.ArgumentTypeError(f"expected {what} >= 1{bound} separated by commas{among}, got {part!r}"
                                             + (f" in {text!r}" if part != text.strip() else ""))
        if int(part) not in counts:
            counts.append(int(part))
    return tuple(counts)


def whole_number(text: str, what: str = "a whole number") -> int:
    """One whole number >= 1 (``what`` names it in the error), as ``whole_numbers`` reads each of its parts."""
    if not _digits(text.strip()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected {what} >= 1, got {text!r}")
    return int(text)


def _digits(text: str) -> bool:
    """ASCII digits, at most 18 of them: a count, and never one that Python's int() refuses (past 4300 digits)."""
    return text.isascii() and text.isdigit() and len(text) <= 18


def gpu_count(text: str) -> int:
    """``--tp``: a whole number of GPUs, at least 1 (the command's and the scripts' flag)."""
    return whole_number(text, "a whole number of GPUs")
