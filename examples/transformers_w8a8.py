"""A transformers model with fused W8A8 MLPs: quantize, generate, save, reload, generate again.

A tiny random Llama (no download) is quantized in place to int8 W8A8 (per-channel weights, per-token
activations), its MLPs swapped for fused ones (silu_and_mul + quantize as one producer); generation
runs; the model is saved as a compressed-tensors checkpoint (readable by vLLM) and loaded back.
Needs the transformers extra: ``pip install -e ".[transformers]"``.
Run: ``python examples/transformers_w8a8.py [--out DIR] [--targets mlp|all]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile

import torch

import fused_quant as fq
from fused_quant.integrations.transformers import check_versions, from_pretrained, quantize_model, save_pretrained


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog='needs the transformers extra: pip install -e ".[transformers]"')
    parser.add_argument("--out", default=None, help="checkpoint folder (default: a temporary one)")
    parser.add_argument("--targets", default="mlp", choices=("mlp", "all"))
    args = parser.parse_args(argv)
    ok, why = check_versions()  # a missing extra was a ModuleNotFoundError traceback, --help included
    if not ok:
        print(f"transformers_w8a8: {why}", file=sys.stderr)
        raise SystemExit(2)
    from transformers import AutoModelForCausalLM, LlamaConfig

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=512, architectures=["LlamaForCausalLM"])
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).eval()

    report = quantize_model(model, fq.kInt8DynamicTokenSym, targets=args.targets)
    print(report)

    prompt = torch.tensor([[1, 5, 9, 33, 100, 7]])
    fq.reset_fusion_counts()
    with torch.inference_mode():  # inference only: quantized weights are buffers, they get no gradients
        tokens = model.generate(prompt, max_new_tokens=8, do_sample=False, pad_token_id=0)
    print("backend:", fq.current_backend().name, "| producer calls:", fq.fusion_counts())
    print("generated:", tokens[0, prompt.shape[1]:].tolist())

    with tempfile.TemporaryDirectory(prefix="fused-quant-llama-") as scratch:  # removed after, unless --out
        out = args.out or scratch
        save_pretrained(model, out)  # model.save_pretrained would raise: it cannot write this format
        reloaded = from_pretrained(out)
        with torch.inference_mode():
            again = reloaded.generate(prompt, max_new_tokens=8, do_sample=False, pad_token_id=0)
    if not torch.equal(again, tokens):
        raise SystemExit("the reloaded checkpoint generated other tokens than the model it was saved from")
    print("saved to", args.out or "a temporary folder (removed)", "and reloaded: same tokens")
    return {"tokens": tokens[0].tolist(), "fusion_counts": fq.fusion_counts(), "out": args.out}


if __name__ == "__main__":
    main()
