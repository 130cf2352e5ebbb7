"""Quantization keys, field-for-field equal to vLLM's ``quant_utils`` vocabulary.

A ``QuantKey`` names what a consumer GEMM accepts: element dtype, how its scale
is laid out (per tensor or per token, static or dynamic) and symmetry. FP8 keys
name the logical OCP e4m3 format; the concrete dtype of a tensor (``e4m3fn`` or
``e4m3fnuz``) comes from the platform, see ``fp8_max``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import torch

from fused_quant.errors import UnsupportedError


class _GroupShape(NamedTuple):
    row: int
    col: int


class GroupShape(_GroupShape):
    """Shape of one quantization group; -1 means the full extent of that dim."""

    PER_TENSOR: ClassVar["GroupShape"]
    PER_TOKEN: ClassVar["GroupShape"]

    def is_per_tensor(self) -> bool:
        return self.row == -1 and self.col == -1

    def is_per_token(self) -> bool:
        return self.row == 1 and self.col == -1

    def is_per_group(self) -> bool:
        return self.row == 1 and self.col >= 1


GroupShape.PER_TENSOR = GroupShape(-1, -1)
GroupShape.PER_TOKEN = GroupShape(1, -1)


@dataclass(frozen=True)
class ScaleDesc:
    """How a key's values are scaled: the scale's ``dtype`` (float32), ``static`` (a calibrated scale given with
    the input) or dynamic (computed from it), and ``group_shape``, the block one scale covers
    (``GroupShape.PER_TENSOR``, ``GroupShape.PER_TOKEN``)."""

    dtype: torch.dtype
    static: bool
    group_shape: GroupShape

    def __str__(self) -> str:
        kind = "static" if self.static else "dynamic"
        if not isinstance(self.group_shape, GroupShape):  # a plain tuple: named as it came
            shape = repr(self.group_shape)
        elif self.group_shape.is_per_tensor():
            shape = "per_tensor"
        elif self.group_shape.is_per_token():
            shape = "per_token"
        else:
            shape = str(tuple(self.group_shape))
        return f"{_abbr(self.dtype)},{kind},{shape}"


@dataclass(frozen=True)
class QuantKey:
    """What a quantized activation is: the code ``dtype`` (int8 or FP8), its ``scale`` (a ``ScaleDesc``), an
    optional second-level ``scale2`` and ``symmetric`` (no zero point). Field for field equal to vLLM's; the four
    keys the package runs are ``KEYS`` (``kInt8DynamicTokenSym``, ...)."""

    dtype: torch.dtype
    scale: ScaleDesc
    scale2: ScaleDesc | None = None
    symmetric: bool = True

    def __reduce_ex__(self, protocol):
        # a package key copied or unpickled is the package's object again (code that compares keys by identity,
        # the fast name lookup); any other key as a dataclass is
        name = key_name_or_none(self)  # by value: another library's key of the fields, or an e4m3fnuz one, too
        if name is not None and KEYS[name] == self:
            return key_from_name, (name,)
        return super().__reduce_ex__(protocol)

    def __str__(self) -> str:
        scale2 = f"scale2({self.scale2})," if self.scale2 else ""
        sym = "symmetric" if self.symmetric else "asymmetric"
        return f"QuantKey({_abbr(self.dtype)},scale({self.scale}),{scale2}{sym})"


def _abbr(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


FP8_DTYPE = torch.float8_e4m3fn  # the logical format FP8 keys name
FP8_FNUZ_DTYPE = torch.float8_e4m3fnuz

kStaticTensorScale = ScaleDesc(torch.float32, True, GroupShape.PER_TENSOR)
kDynamicTokenScale = ScaleDesc(torch.float32, False, GroupShape.PER_TOKEN)

kFp8StaticTensorSym = QuantKey(FP8_DTYPE, kStaticTensorScale, symmetric=True)
kFp8DynamicTokenSym = QuantKey(FP8_DTYPE, kDynamicTokenScale, symmetric=True)
kInt8StaticTensorSym = QuantKey(torch.int8, kStaticTensorScale, symmetric=True)
kInt8DynamicTokenSym = QuantKey(torch.int8, kDynamicTokenScale, symmetric=True)



class KeyEntry(NamedTuple):
    name: str  # short stable name: the CLI, custom ops and JSON output
    key: QuantKey
    code: int  # the Triton kernels' QUANT constexpr


# The key vocabulary: every other key table of the package is derived from this one.
KEY_TABLE: tuple[KeyEntry, ...] = (
    KeyEntry("fp8_static_tensor", kFp8StaticTensorSym, 0),
    KeyEntry("fp8_dynamic_token", kFp8DynamicTokenSym, 1),
    KeyEntry("int8_static_tensor", kInt8StaticTensorSym, 2),
    KeyEntry("int8_dynamic_token", kInt8DynamicTokenSym, 3),
)
KEYS: dict[str, QuantKey] = {e.name: e.key for e in KEY_TABLE}
KERNEL_CODES: dict[str, int] = {e.name: e.code for e in KEY_TABLE}
_NAMES = {key: name for name, key in KEYS.items()}
_NAMES_BY_ID = {id(key): name for name, key in KEYS.items()}  # hot path: callers pass KEYS' own objects

FP8_DTYPES = (FP8_DTYPE, FP8_FNUZ_DTYPE)  # the concrete FP8 dtypes keys, weights and producers may use
INT8_MAX = 127.0


def key_name(key: QuantKey) -> str:
    """Short name of one of the four supported keys; ValueError for others."""
    name = key_name_or_none(key)
    if name is None:
        if isinstance(key, str):  # a name already, or not one
            hint = f"key_from_name({key!r}) gives its key" if key in KEYS else f"key names: {', '.join(KEYS)}"
            raise TypeError(f"key_name takes a QuantKey, got the string {key!r} ({hint})")
        raise UnsupportedError(f"unsupported quant key {key}; supported: {', '.join(KEYS)}")
    return name


def key_from_name(name: str) -> QuantKey:
    """The key of a name in ``KEYS`` (``"int8_dynamic_token"``, ...); TypeError for a non-string,
    UnsupportedError naming the known names for an unknown one."""
    if not isinstance(name, str):
        raise TypeError(f"a quant key name is a string (one of {', '.join(KEYS)}), got {type(name).__name__} {name!r}")
    try:
        return KEYS[name]
    except KeyError:
        raise UnsupportedError(f"unknown quant key name {name!r}; expected one of {', '.join(KEYS)}") from None


def key_name_or_none(key: QuantKey) -> str | None:
    """Short name of a supported key, None for any other key."""
    name = _NAMES_BY_ID.get(id(key))
    if name is not None and KEYS[name] is key:
        return name
    try:
        return _NAMES.get(normalize_key(key))
    except (AttributeError, TypeError):  # not a key (no dtype), or a field that cannot be hashed (a list group_shape)
        return None


def label(key: object) -> str:
    """How messages name a key: its short name where it is one of the four (vLLM's key objects too, by value),
    else its full form."""
    try:
        name = key_name_or_none(to_quant_key(key))
    except (TypeError, ValueError):  # not a key at all: named as it came
        name = None
    return name or str(key)


def to_quant_key(key: object, what: str = "key") -> QuantKey:
    """A ``QuantKey`` from a ``QuantKey`` (itself), a key name (``"int8_dynamic_token"``) or a key object
    of another library with the same fields (vLLM's ``QuantKey``, by value), supported or not; anything
    else raises naming what came and what is accepted."""
    if isinstance(key, QuantKey):
        return key
    if isinstance(key, str):
        if key not in KEYS:
            raise UnsupportedError(f"{what}: unknown quant key name {key!r}; expected one of {', '.join(KEYS)}")
        return KEYS[key]
    return _by_value(key, what)


def as_key(key: object, what: str = "key") -> QuantKey:
    """``to_quant_key`` for one of the four supported keys: that key's own object (``KEYS``)."""
    found = key_name_or_none(to_quant_key(key, what))
    if found is None:
        raise UnsupportedError(f"{what}: unsupported quant key {key}; supported: {', '.join(KEYS)}")
    return KEYS[found]


def _by_value(key: object, what: str) -> QuantKey:
    """A key object of another class with QuantKey's fields (dtype, scale: dtype, static, group_shape)."""
    qualname = f"{type(key).__module__}.{type(key).__qualname__}"
    try:
        scale = key.scale
        group = scale.group_shape  # by its fields (vLLM's is a NamedTuple; another library's may be a dataclass)
        shape = GroupShape(group.row, group.col) if hasattr(group, "row") else GroupShape(*tuple(group))
        return QuantKey(key.dtype, ScaleDesc(scale.dtype, bool(scale.static), shape),
                        None if getattr(key, "scale2", None) is None else key.scale2, bool(key.symmetric))
    except (AttributeError, TypeError) as exc:
        raise TypeError(f"{what} must be a fused_quant QuantKey, a key name ({', '.join(KEYS)}) or a key with "
                        f"the same fields (dtype, scale, symmetric), got {qualname}") from exc


def normalize_key(key: QuantKey) -> QuantKey:
    """Map a key whose dtype is a concrete FP8 dtype (e.g. fnuz) to the logical key."""
    if key.dtype == FP8_FNUZ_DTYPE:
        return QuantKey(FP8_DTYPE, key.scale, key.scale2, key.symmetric)
    return key


def is_fp8(key: QuantKey) -> bool:
    return key.dtype in FP8_DTYPES


def gemm_kind(key: QuantKey) -> str:
    """The GEMM kind a key's activations feed (``GemmProblem.kind``, the providers' ``kind``): "fp8" or "int8"."""
    return "fp8" if is_fp8(key) else "int8"


def is_per_token(key: QuantKey) -> bool:
    return key.scale.group_shape.is_per_token()


def is_static(key: QuantKey) -> bool:
    return key.scale.static


def fp8_max(fp8_dtype: torch.dtype) -> float:
    """``M8`` of docs/NUMERICS.md for a concrete FP8 dtype: vLLM's (and our) FP8 max, the format max for
    e4m3fn; 224 for e4m3fnuz, below the format's 240 on purpose (vLLM quant_utils.get_fp8_min_max).

    Literals, not a module-level table: torch.compile(dynamic=True) of torch 2.11 reads a float from a
    global table as a symbol, then specializes it and traces the frame again (one extra compile)."""
    if fp8_dtype == torch.float8_e4m3fn:
        return 448.0
    if fp8_dtype == torch.float8_e4m3fnuz:
        return 224.0
    raise UnsupportedError(f"unsupported FP8 dtype {fp8_dtype}; expected torch.float8_e4m3fn or torch.float8_e4m3fnuz")


def storage_dtype(key: QuantKey, fp8_dtype: torch.dtype = FP8_DTYPE) -> torch.dtype:
    """Concrete dtype of the quantized data for ``key`` on a platform whose FP8 is ``fp8_dtype``."""
    return fp8_dtype if is_fp8(key) else key.dtype
