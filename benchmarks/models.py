"""The decoder whose linears the benchmarks time: Llama-3-8B by default, or any dense decoder from its Hugging Face
``config.json`` (``--model``), as one GPU of ``--tp`` holds it.

A decoder layer's four linears, as N x K (weight rows x the reduction), from the config's sizes:

- ``qkv``: (attention heads + 2 x key-value heads) x head_dim rows, hidden_size wide;
- ``o``: hidden_size rows, heads x head_dim wide;
- ``gate_up``: 2 x intermediate_size rows, hidden_size wide;
- ``down``: hidden_size rows, intermediate_size wide.

Under tensor parallelism over ``tp`` GPUs each holds 1/tp of qkv's and gate_up's rows (column parallel) and of o's
and down's K (row parallel): what one GPU streams per token. Key-value heads fewer than ``tp`` are replicated, one
a GPU. The MLP benchmarks take hidden_size wide tokens through gate_up and down (intermediate_size / tp).

Mixture-of-experts configs are refused: which width an expert's MLP has differs between model families
(``intermediate_size``, ``moe_intermediate_size``, dense layers beside the experts); pass a config whose
``intermediate_size`` is the width to time, without the expert fields.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from fused_quant.flags import gpu_count

LLAMA_3_8B = {"hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
              "head_dim": 128}
REQUIRED = ("hidden_size", "intermediate_size", "num_attention_heads")
# fields that mark a mixture of experts in the configs of transformers' model families
EXPERT_FIELDS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_intermediate_size")


@dataclass(frozen=True)
class Model:
    """``shapes``: ``{"qkv" | "o" | "gate_up" | "down": (N, K)}`` on one GPU; ``d`` x ``h``: the MLP's hidden and
    intermediate widths on one GPU; ``name``: how the benchmarks' lines and plots call it."""

    name: str
    shapes: dict[str, tuple[int, int]]
    d: int
    h: int

    def pick(self, labels) -> dict[str, tuple[int, int]]:
        """The shapes of ``labels`` (each once, in the order given); ValueError naming the labels it has not."""
        unknown = [label for label in labels if label not in self.shapes]
        if unknown:
            raise ValueError(f"--shapes takes names of {', '.join(self.shapes)}, got {', '.join(unknown)}")
        return {label: self.shapes[label] for label in labels}


def _size(config: dict, field: str, where: str) -> int:
    value = config.get(field)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where}: {field} must be a positive integer, got {value!r}")
    return value


def of_config(config: dict, name: str, tp: int = 1) -> Model:
    """The ``Model`` of a Hugging Face decoder ``config`` (its ``text_config`` where it nests one) on one GPU of
    ``tp``; ValueError naming the field and the value where the config does not describe one."""
    if not isinstance(config, dict):
        raise ValueError(f"{name}: expected a JSON object of a model's config, got {type(config).__name__}")
    if "hidden_size" not in config and isinstance(config.get("text_config"), dict):
        config = config["text_config"]  # a multimodal model's language part
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise ValueError(f"{name}: tp must be a positive integer, got {tp!r}")
    missing = [f for f in REQUIRED if f not in config]
    if missing:
        raise ValueError(f"{name}: not a decoder's config: no {', '.join(missing)} (expected the fields "
                         f"{', '.join(REQUIRED)}, and num_key_value_heads / head_dim where they differ from the heads)")
    experts = [f for f in EXPERT_FIELDS if config.get(f)]
    if experts:
        raise ValueError(f"{name}: a mixture-of-experts config ({', '.join(f'{f}={config[f]}' for f in experts)}); "
                         "the benchmarks time dense layers: pass a config whose intermediate_size is the MLP width "
                         "to time, without the expert fields")
    hidden, inter = _size(config, "hidden_size", name), _size(config, "intermediate_size", name)
    heads = _size(config, "num_attention_heads", name)
    kv = _size(config, "num_key_value_heads", name) if config.get("num_key_value_heads") is not None else heads
    if config.get("head_dim") is not None:
        head_dim = _size(config, "head_dim", name)
    elif hidden % heads:
        raise ValueError(f"{name}: no head_dim, and hidden_size {hidden} is not a multiple of "
                         f"num_attention_heads {heads}")
    else:
        head_dim = hidden // heads
    if heads % kv:
        raise ValueError(f"{name}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}")
    for what, size in (("num_attention_heads", heads), ("intermediate_size", inter)):
        if size % tp:
            raise ValueError(f"{name}: {what} {size} does not split over tp={tp} GPUs")
    if kv % tp and tp % kv:
        raise ValueError(f"{name}: num_key_value_heads {kv} neither splits over tp={tp} GPUs nor divides it")
    heads_gpu, kv_gpu, inter_gpu = heads // tp, max(kv // tp, 1), inter // tp
    shapes = {"qkv": ((heads_gpu + 2 * kv_gpu) * head_dim, hidden), "o": (hidden, heads_gpu * head_dim),
              "gate_up": (2 * inter_gpu, hidden), "down": (hidden, inter_gpu)}
    return Model(name if tp == 1 else f"{name}, tp={tp}", shapes, hidden, inter_gpu)


def read(path: str | Path, tp: int = 1) -> Model:
    """The ``Model`` of the ``config.json`` at ``path`` (or in the folder ``path``), named by its folder (a file of
    another name by its stem); OSError or ValueError saying what was looked for and what came."""
    if not str(path):  # Path("") is the working folder
        raise ValueError("--model is empty: name a Hugging Face config.json, or the model folder that holds one")
    path = Path(path)
    file = path / "config.json" if path.is_dir() else path
    if not file.is_file():
        what = ("no config.json in that folder" if path.is_dir() else "not a regular file" if path.exists()
                else "no such file")
        raise FileNotFoundError(f"--model {path}: {what} (expected a Hugging Face config.json, or the model folder "
                                "that holds one)")
    try:
        config = json.loads(file.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:  # nesting past Python's stack too
        raise ValueError(f"--model {file}: not a JSON file ({type(exc).__name__}: {exc})") from None
    return of_config(config, (file.parent.name if file.name == "config.json" else file.stem) or str(file), tp)


def default(tp: int = 1) -> Model:
    return of_config(LLAMA_3_8B, "Llama-3-8B", tp)


def parse(ap: argparse.ArgumentParser, argv=None) -> tuple[argparse.Namespace, Model]:
    """A benchmark script's options, ``--model`` and ``--tp`` added to ``ap``, and their ``Model`` (``from_args``,
    as ``fused-quant bench`` reads them); a usage error (exit code 2) saying what could not be read."""
    ap.add_argument("--model", metavar="CONFIG",
                    help="a Hugging Face config.json, or a model folder holding one: that decoder's linears and MLP "
                         "instead of Llama-3-8B's")
    ap.add_argument("--tp", type=gpu_count, default=1, metavar="N",
                    help="tensor-parallel GPUs: the shapes one of N GPUs holds (default: 1)")
    args = ap.parse_args(argv)
    try:
        return args, from_args(args)
    except (OSError, ValueError) as exc:
        ap.error(str(exc))


def from_args(args: argparse.Namespace) -> Model:
    """The ``Model`` of ``--model`` / ``--tp`` (Llama-3-8B without ``--model``)."""
    tp = getattr(args, "tp", None)
    tp = 1 if tp is None else tp
    return default(tp) if getattr(args, "model", None) is None else read(args.model, tp)
