"""What the ``fused-quant`` command and the scripts of benchmarks/ share on a command line: the readers of numbers
typed there, so that a count is read, and refused, in one way and one wording everywhere, and ``run_guarded``, the
one way a command's output failures and interruption are told."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

# exit statuses beside 0 (done), 1 (selftest: a check failed) and 2 (a bad flag or value, or what cannot run here), as
# a shell reports a command that SIGPIPE or SIGINT ended: a reader that left early (`| head`), Ctrl-C; and sysexits'
# EX_IOERR where the output cannot be written (a full disk, `> /dev/full`)
BROKEN_PIPE, INTERRUPTED, OUTPUT_FAILED = 141, 130, 74


def whole_numbers(text: str, what: str, most: int | None = None, allowed=()) -> tuple[int, ...]:
    """Whole numbers >= 1 separated by commas, in the order given, each once: at most ``most`` and one of
    ``allowed`` where given. Anything else raises ``argparse.ArgumentTypeError`` naming ``what`` was expected and
    what came; every flag that takes counts reads them through it."""
    counts = []
    for part in text.split(","):
        part = part.strip()
        if (not _digits(part) or int(part) < 1 or (most and int(part) > most)
                or (allowed and int(part) not in allowed)):
            bound = f" (at most {most})" if most else _too_long(part)
            among = f", each one of {', '.join(map(str, allowed))}" if allowed else " (like 1,16,224)"
            raise argparse.ArgumentTypeError(f"expected {what} >= 1{bound} separated by commas{among}, got {part!r}"
                                             + (f" in {text!r}" if part != text.strip() else ""))
        if int(part) not in counts:
            counts.append(int(part))
    return tuple(counts)


def whole_number(text: str, what: str = "a whole number") -> int:
    """One whole number >= 1 (``what`` names it in the error), as ``whole_numbers`` reads each of its parts."""
    if not _digits(text.strip()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected {what} >= 1{_too_long(text.strip())}, got {text!r}")
    return int(text)


_MOST_DIGITS = 18


def _too_long(text: str) -> str:
    """What a refusal adds for a number ``_digits`` refuses for its length alone: the limit."""
    too_long = text.isascii() and text.isdigit() and len(text) > _MOST_DIGITS
    return f" of at most {_MOST_DIGITS} digits" if too_long else ""


def _digits(text: str) -> bool:
    """ASCII digits, at most 18 of them: a count, and never one that Python's int() refuses (past 4300 digits)."""
    return text.isascii() and text.isdigit() and len(text) <= _MOST_DIGITS


def gpu_count(text: str) -> int:
    """``--tp``: a whole number of GPUs, at least 1 (the command's and the scripts' flag)."""
    return whole_number(text, "a whole number of GPUs")


class _OutputFailed(Exception):
    """A write to stdout that failed (its OSError the cause), told apart from every other OSError."""


class _Stdout:
    """stdout while a command runs: its writes' failures (but a reader that left) raise ``_OutputFailed``."""

    def __init__(self, stream) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        return self._failing(self.stream.write, text)

    def flush(self) -> None:
        self._failing(self.stream.flush)

    @staticmethod
    def _failing(call, *args):
        try:
            return call(*args)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _OutputFailed from exc

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def run_guarded(body: Callable[[], int], name: Callable[[], str]) -> int:
    """Runs a command's ``body`` (its exit status) as every command of the package runs: what it printed flushed
    before it returns; a reader that left (``| head``), an interruption and a write to stdout that failed (a full
    disk) told on stderr under ``name()`` and by the exit status (BROKEN_PIPE, INTERRUPTED, OUTPUT_FAILED)."""
    stdout, sys.stdout = sys.stdout, _Stdout(sys.stdout)
    try:
        status = body()
        sys.stdout.flush()  # here, not at exit: a failing write of what it printed is this command's to report
        return status
    except BrokenPipeError:  # `fused-quant selftest | head`: the reader is gone, nothing more to say
        # Python flushes stdout again at exit; point it at devnull so that flush cannot fail too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE
    except KeyboardInterrupt:
        print(f"\n{name()}: interrupted", file=sys.stderr)
        return INTERRUPTED
    except _OutputFailed as failed:  # a full disk, `> /dev/full`
        os.dup2(os.open(os.devnull, os.O_WRONLY), stdout.fileno())  # as above: the exit's flush cannot fail
        try:
            print(f"{name()}: cannot write its output: {failed.__cause__.strerror or failed.__cause__}",
                  file=sys.stderr)
        except OSError:  # stderr too: the status says it
            pass
        return OUTPUT_FAILED
    finally:
        sys.stdout = stdout
