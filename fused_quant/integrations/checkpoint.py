"""The compressed-tensors checkpoint format of fused-quant layers (llm-compressor's on-disk format).

``parse_config`` maps a ``quantization_config``'s groups to quant keys, refusing what ``QuantLinear``
does not run (naming the group and the field); ``quantization_config`` writes them back.
``layer_from_tensors`` / ``layer_tensors`` convert between a layer's checkpoint tensors
(``weight`` int8 or FP8 e4m3fn ``[N, K]``, ``weight_scale`` float32 ``[N, 1]``, static ``input_scale``
float32 ``[1]``, ``bias``) and a ``QuantLinear``; scales stay float32.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from fused_quant import keys as K
from fused_quant.errors import QuantDTypeError, ScaleError, ShapeMismatchError, UnsupportedError
from fused_quant.modules import QuantLinear
from fused_quant.validation import check_weight_scale_shape, check_weight_scale_values

FORMATS = {"int-quantized": "int", "float-quantized": "float"}  # checkpoint format -> weights.type
# (input_activations.type, strategy, dynamic) -> the key QuantLinear consumes
ACT_KEYS = {
    ("int", "token", True): K.kInt8DynamicTokenSym,
    ("int", "tensor", False): K.kInt8StaticTensorSym,
    ("float", "token", True): K.kFp8DynamicTokenSym,
    ("float", "tensor", False): K.kFp8StaticTensorSym,
}
_WEIGHT_STRATEGIES = ("channel", "tensor")  # a tensor scale is expanded to one per channel (same values)


@dataclass(frozen=True)
class Group:
    """One config group: the modules it targets and the key its layers consume."""

    name: str
    targets: tuple[str, ...]
    key: K.QuantKey
    weight_strategy: str = "channel"  # "channel": one weight scale per output channel; "tensor": one in all


def _value(v: object) -> object:
    return getattr(v, "value", v)  # compressed-tensors' str enums


def _check(ok: bool, where: str, field: str, got: object, expected: str) -> None:
    if not ok:
        raise UnsupportedError(f"{where}.{field} is {_value(got)!r}; fused-quant runs {expected}")


def parse_config(qc: dict | None, where: str = "quantization_config") -> tuple[list[Group], list[str]]:
    """(groups, ignore) of a compressed-tensors ``quantization_config``; UnsupportedError for anything
    QuantLinear does not run (zero points, group / block weights, bits other than 8, weight-only, ...)."""
    from compressed_tensors.quantization import QuantizationConfig

    if not isinstance(qc, dict) or qc.get("quant_method") != "compressed-tensors":
        got = f"quant_method {qc.get('quant_method')!r}" if isinstance(qc, dict) else f"a {type(qc).__name__}"
        raise UnsupportedError(f"{where}: expected a compressed-tensors quantization_config "
                               f"(quant_method 'compressed-tensors'), got {got}")
    try:
        cfg = QuantizationConfig.model_validate(qc)
    except ValueError as exc:  # pydantic's ValidationError
        raise UnsupportedError(f"{where}: not a valid compressed-tensors config: {exc}") from None
    _check(cfg.kv_cache_scheme is None, where, "kv_cache_scheme", "set", "no KV-cache quantization")
    # transformers' own save of a compressed-tensors model on a node without the kernels writes float weights
    _check(_value(qc.get("quantization_status")) != "decompressed", where, "quantization_status", "decompressed",
           "checkpoints whose weights are stored quantized ('compressed'); a decompressed one holds float weights: "
           "load it as a float model (AutoModelForCausalLM.from_pretrained(path, quantization_config="
           "CompressedTensorsConfig(dequantize=True))) and quantize_model it")
    # written beside the quantization by compressed-tensors' compressor: transforms (rotations some of which apply
    # at run time) and sparse weight formats change what a layer computes or how its tensors are stored
    _check(not qc.get("transform_config"), where, "transform_config", "set", "no transforms (rotations)")
    sparsity = qc.get("sparsity_config") or {}
    fmt = sparsity.get("format", "dense") if isinstance(sparsity, dict) else sparsity
    _check(fmt == "dense", where, "sparsity_config.format", fmt, "dense weights (no sparse format)")
    groups = []
    for name, scheme in cfg.config_groups.items():
        at = f"{where}.config_groups.{name}"
        fmt = _value(scheme.format or (cfg.format if "format" in qc else None))  # not the library's default
        _check(fmt in FORMATS, at, "format", fmt, " or ".join(repr(f) for f in FORMATS))
        w, a = scheme.weights, scheme.input_activations
        _check(w is not None, at, "weights", None, "quantized weights")
        _check(a is not None, at, "input_activations", None, "W8A8 (weight-only schemes are not supported)")
        _check(scheme.output_activations is None, at, "output_activations", "set", "no output quantization")
        for part, args in (("weights", w), ("input_activations", a)):
            _check(args.num_bits == 8, at, f"{part}.num_bits", args.num_bits, "8 bits")
            _check(_value(args.type) == FORMATS[fmt], at, f"{part}.type", args.type,
                   f"{FORMATS[fmt]!r} in format {fmt!r}")
            _check(args.symmetric, at, f"{part}.symmetric", args.symmetric, "symmetric quantization (no zero points)")
            _check(args.group_size is None, at, f"{part}.group_size", args.group_size, "no groups")
            _check(args.block_structure is None, at, f"{part}.block_structure", args.block_structure, "no blocks")
            _check(args.actorder is None, at, f"{part}.actorder", args.actorder, "no activation ordering")
        _check(_value(w.strategy) in _WEIGHT_STRATEGIES, at, "weights.strategy", w.strategy, "'channel' or 'tensor'")
        _check(w.dynamic is False, at, "weights.dynamic", w.dynamic, "static weight scales")
        act = (_value(a.type), _value(a.strategy), a.dynamic)
        _check(act in ACT_KEYS, at, "input_activations", f"strategy {act[1]}, dynamic {act[2]}",
               "dynamic per-token or static per-tensor activations")
        groups.append(Group(name, tuple(scheme.targets), ACT_KEYS[act], _value(w.strategy)))
    return groups, list(cfg.ignore or [])


def quantization_config(layers: list[tuple[str, QuantLinear]], float_linears: list[str]) -> dict:
    """The ``quantization_config`` of these layers: one group per key (targets "Linear" when there is
    one), ``float_linears`` ignored."""
    from compressed_tensors.quantization import QuantizationArgs, QuantizationConfig, QuantizationScheme

    by_key: dict[str, list[str]] = {}
    for name, layer in layers:
        by_key.setdefault(K.key_name(layer.input_key), []).append(name)
    kinds = {"float" if K.is_fp8(K.KEYS[k]) else "int" for k in by_key}
    if len(kinds) != 1:
        raise UnsupportedError(f"save_pretrained: int8 and FP8 layers in one model cannot share one "
                               f"compressed-tensors format; got keys {sorted(by_key)}")
    kind = kinds.pop()
    groups = {}
    for i, (name, names) in enumerate(sorted(by_key.items())):
        key = K.KEYS[name]
        static = K.is_static(key)
        args = dict(num_bits=8, type=kind, symmetric=True)
        groups[f"group_{i}"] = QuantizationScheme(
            targets=["Linear"] if len(by_key) == 1 else names,
            weights=QuantizationArgs(**args, strategy="channel", dynamic=False),
            input_activations=QuantizationArgs(**args, strategy="tensor" if static else "token", dynamic=not static))
    fmt = next(f for f, t in FORMATS.items() if t == kind)
    cfg = QuantizationConfig(config_groups=groups, ignore=float_linears, format=fmt, quantization_status="compressed")
    return cfg.model_dump(exclude_none=True, mode="json") | {"quant_method": "compressed-tensors"}


INDEX = "model.safetensors.index.json"  # a sharded checkpoint's index: tensor name -> shard file


def read_json(path: Path) -> dict:
    """A checkpoint's JSON file as a dict; one that is not (corrupt, truncated, a list) is refused naming the file."""
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UnsupportedError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise UnsupportedError(f"{path}: expected a JSON object, got a {type(data).__name__}")
    return data


def index_shards(index: Path) -> list[str]:
    """The shard files a sharded checkpoint's index lists, each once, sorted."""
    weight_map = read_json(index).get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(f, str) for f in weight_map.values()):
        raise UnsupportedError(f"{index}: expected a weight_map of tensor names to shard files, got "
                               f"{type(weight_map).__name__}")
    return sorted(set(weight_map.values()))


def load_tensors(path: Path, steps: Callable[[list], Iterable] = list) -> dict[str, torch.Tensor]:
    """Every tensor of ``model.safetensors`` or of the shards ``model.safetensors.index.json`` lists (read in the
    order ``steps(files)`` yields them: a progress bar's)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    index = path / INDEX
    if index.exists() and (path / "model.safetensors").exists():  # transformers reads the single file, we the shards
        raise UnsupportedError(f"{path}: holds both model.safetensors and {INDEX}; which one is the checkpoint is not "
                               "said (transformers reads model.safetensors, the index names its shards): remove one")
    if index.exists():
        files = index_shards(index)
    elif (path / "model.safetensors").exists():
        files = ["model.safetensors"]
    else:
        raise UnsupportedError(f"{path}: expected model.safetensors or model.safetensors.index.json")
    missing = [f for f in files if not (path / f).is_file()]
    if missing:
        raise FileNotFoundError(f"{path}: {INDEX} lists shard files that are not there: {missing[:4]}")
    tensors: dict[str, torch.Tensor] = {}
    found_in: dict[str, str] = {}
    for f in steps(files):
        try:
            shard = load_file(str(path / f))
        except SafetensorError as exc:  # safetensors names no file: a sharded checkpoint's reader needs it
            raise UnsupportedError(f"{path / f}: not a readable safetensors file ({exc})") from None
        again = sorted(shard.keys() & tensors.keys())
        if again:  # which copy is meant is not said by the files: one of them would be taken silently
            raise UnsupportedError(f"{path}: {again[0]} is in two shard files, {found_in[again[0]]} and {f}"
                                   + (f" ({len(again) - 1} more tensors too)" if len(again) > 1 else ""))
        tensors.update(shard)
        found_in.update(dict.fromkeys(shard, f))
    return tensors


def to_platform_fp8(w: torch.Tensor, ws: torch.Tensor, fp8_dtype: torch.dtype, where: str = "weight",
                    input_scale: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Checkpoint e4m3fn weights as ``fp8_dtype``, with their scales and a static input scale: for e4m3fnuz the same
    bits mean half the value (bias 8, not 7), so the weight scale doubles, and so does the input scale (activations
    quantized to e4m3fnuz, whose largest value is 240, not 448, then keep the checkpoint's headroom, as vLLM does);
    0x80 (-0 in e4m3fn, NaN in e4m3fnuz) becomes 0; a NaN weight, which would become +-240, is refused
    (``hip_w8a8.fp8.e4m3fn_to_e4m3fnuz``, the one conversion)."""
    if fp8_dtype == K.FP8_DTYPE:
        return w, ws, input_scale
    from fused_quant.backends.hip_w8a8.fp8 import e4m3fn_to_e4m3fnuz

    return e4m3fn_to_e4m3fnuz(w, ws, input_scale, where=where)


def to_checkpoint_fp8(w: torch.Tensor, ws: torch.Tensor, input_scale: torch.Tensor | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The inverse of ``to_platform_fp8``: e4m3fn weights, their scales and the input scale. An e4m3fnuz code
    has the e4m3fn code of the same bits at half the scale, except +-240 (0x7f / 0xff), NaN in e4m3fn: our own
    quantizer stops at 224 on e4m3fnuz (``keys.fp8_max``), but weights quantized by another tool and given to a layer
    may reach the format's 240. Such a channel is written by value
    at its own scale, its values under 2**-6 rounded to e4m3fn's step there (2**-9: at most 2**-10 off, of a
    channel whose largest value is 240); every other channel as the same bits at half its scale."""
    if w.dtype == K.FP8_DTYPE:
        return w, ws, input_scale
    bits = w.view(torch.uint8)
    by_value = ((bits & 0x7F) == 0x7F).any(dim=1)  # the channels holding +-240
    out = bits.view(K.FP8_DTYPE)
    if bool(by_value.any()):
        # as the scale is laid out: one flag per channel, or one for the whole weight under one scale
        by_value = by_value.reshape(ws.shape) if ws.numel() == w.shape[0] else by_value.any().reshape(ws.shape)
        rows = by_value.reshape(-1, 1)
        out = torch.where(rows, w.float().to(K.FP8_DTYPE).view(torch.uint8), bits).view(K.FP8_DTYPE)
        ws = torch.where(by_value, ws * 2.0, ws)  # halved below with the rest: these keep their own scale
    return out, ws / 2.0, None if input_scale is None else input_scale / 2.0


def _pop(tensors: dict, name: str, what: str, group: Group) -> torch.Tensor:
    try:
        return tensors.pop(f"{name}.{what}")
    except KeyError:
        static = f" (config group {group.name} is static per-tensor)" if what == "input_scale" else ""
        error = ScaleError if what.endswith("scale") else UnsupportedError
        raise error(f"{name}: the checkpoint has no {name}.{what}{static}") from None


def layer_from_tensors(name: str, linear: nn.Linear, tensors: dict, group: Group, out_dtype: torch.dtype,
                       fp8_dtype: torch.dtype) -> QuantLinear:
    """The QuantLinear for ``linear`` (a meta-device skeleton: only its shape is read), from the checkpoint
    tensors of ``name``, which are removed from ``tensors``."""
    w = _pop(tensors, name, "weight", group)
    want = K.FP8_DTYPE if K.is_fp8(group.key) else torch.int8
    if w.dtype != want:  # before its scale: a float layer the config targets has none, and this says why
        if w.dtype == K.FP8_FNUZ_DTYPE:
            why = " (compressed-tensors stores FP8 as e4m3fn; e4m3fnuz codes are not this format)"
        elif w.dtype in K.FP8_DTYPES or not w.is_floating_point():
            why = f" (codes of another type: the config's {group.name} says {want})"
        else:
            why = " (a float layer: should the config's ignore name it?)"
        raise QuantDTypeError(f"{name}.weight: config group {group.name} stores {want} weights, got {w.dtype}{why}")
    ws = _pop(tensors, name, "weight_scale", group)
    if tuple(w.shape) != (linear.out_features, linear.in_features):
        raise ShapeMismatchError(f"{name}.weight: the model expects [N, K] = [{linear.out_features}, "
                                 f"{linear.in_features}], the checkpoint has {list(w.shape)}", layer=name,
                                 n=linear.out_features, k=linear.in_features, w_shape=w.shape)
    n = w.shape[0]
    check_weight_scale_shape(ws, n, what=f"{name}.weight_scale")
    count = 1 if group.weight_strategy == "tensor" else n
    if ws.numel() != count:  # the config's strategy and the tensor disagree: which one is meant is a guess
        raise ScaleError(f"{name}.weight_scale: config group {group.name} has weights.strategy "
                         f"{group.weight_strategy!r}, so {count} scale{'s' * (count != 1)}, the checkpoint has "
                         f"{ws.numel()} (shape {list(ws.shape)})")
    if not ws.is_floating_point():
        raise QuantDTypeError(f"{name}.weight_scale: weight scales are float (float32 in compressed-tensors "
                              f"checkpoints), got {ws.dtype}")
    ws = ws.to(torch.float32).reshape(-1, 1).expand(n, 1).contiguous()
    check_weight_scale_values(ws, what=f"{name}.weight_scale")
    scale = _pop(tensors, name, "input_scale", group) if K.is_static(group.key) else None
    if scale is not None:
        if scale.numel() != 1:
            raise ScaleError(f"{name}.input_scale: a static per-tensor scale has 1 value, got shape "
                             f"{list(scale.shape)}")
        if not scale.is_floating_point():
            raise QuantDTypeError(f"{name}.input_scale: a static scale is float (float32 in compressed-tensors "
                                  f"checkpoints), got {scale.dtype}")
        scale = scale.to(torch.float32)
    if K.is_fp8(group.key):
        w, ws, scale = to_platform_fp8(w, ws, fp8_dtype, f"{name}.weight", scale)
    bias = tensors.pop(f"{name}.bias", None)
    if (bias is None) != (linear.bias is None):
        raise ShapeMismatchError(f"{name}.bias: the model {'has' if linear.bias is not None else 'has no'} "
                                 f"bias, the checkpoint {'has none' if bias is None else 'has one'}", layer=name)
    return QuantLinear(w, ws, group.key, bias=bias, input_scale=scale, out_dtype=out_dtype, name=name)


def layer_tensors(name: str, layer: QuantLinear, rows: slice,
                  input_scale: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """``layer``'s checkpoint tensors (its rows ``rows``, e.g. the gate half of a merged gate_up) under ``name``;
    ``input_scale`` (as the layer would hold it) in place of the layer's static one."""
    w, ws, scale = layer.weight[rows], layer.weight_scale[rows], layer.input_scale
    if input_scale is not None and scale is not None:
        scale = input_scale.to(scale.device)
    if K.is_fp8(layer.input_key):
        w, ws, scale = to_checkpoint_fp8(w, ws, scale)
    out = {f"{name}.weight": w.contiguous().cpu(), f"{name}.weight_scale": ws.contiguous().cpu()}
    if layer.bias is not None:
        out[f"{name}.bias"] = layer.bias[rows].contiguous().cpu()
    if scale is not None:
        out[f"{name}.input_scale"] = scale.reshape(1).clone().cpu()
    return out
