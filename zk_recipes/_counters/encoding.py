"""Counter values as bytes: Curator's encoding, shared by SharedCount and the atomics.

A number lives in one node as big-endian two's complement: 4 bytes for
SharedCount and AtomicInt, 8 for AtomicLong — Curator's bytes exactly, so
Java and Python share counters. Arithmetic wraps as Java's does.
"""

from __future__ import annotations

from zk_recipes._errors import ConfigurationError, CorruptedValueError, WrongTypeError


def _bounds(bits: int) -> tuple[int, int]:
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def wrap(value: int, bits: int) -> int:
    """``value`` reduced to a ``bits``-bit two's complement int, as Java arithmetic does."""
    half = 1 << (bits - 1)
    return ((value + half) % (1 << bits)) - half


def check_int(value: object, bits: int, what: str) -> int:
    """``value`` if it is an int that fits ``bits`` signed bits; TypeError/ValueError if not."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise WrongTypeError(f"{what} must be an int, got {value!r}")
    low, high = _bounds(bits)
    if not low <= value <= high:
        raise ConfigurationError(
            f"{what} must fit a signed {bits}-bit int ({low}..{high}), got {value}"
        )
    return value


def encode(value: int, bits: int) -> bytes:
    """Big-endian two's complement, as Java's ByteBuffer writes it."""
    return value.to_bytes(bits // 8, "big", signed=True)


def decode(data: bytes, bits: int, path: str, *, empty_is_zero: bool) -> int:
    """The number in ``data``; extra trailing bytes are ignored, as in Curator."""
    width = bits // 8
    if not data and empty_is_zero:
        return 0
    if len(data) < width:
        raise CorruptedValueError(
            f"{path} holds {len(data)} byte(s) ({data.hex() or 'empty'}), not a {bits}-bit "
            f"counter ({width} bytes, big-endian). Another program wrote it; fix or delete "
            "the node.",
            path,
        )
    return int.from_bytes(data[:width], "big", signed=True)


def is_newer(candidate_mzxid: int, current_mzxid: int) -> bool:
    """Whether a read or write (by its stat's mzxid) is newer than what the cache holds.

    mzxid is the zxid of the node's last write: 64 bits, growing with every
    change in the ensemble (a delete and re-create too). dataVersion is NOT
    used: it wraps from 2**31 - 1 to -2**31 and restarts at 0 on re-create.
    """
    return candidate_mzxid > current_mzxid
