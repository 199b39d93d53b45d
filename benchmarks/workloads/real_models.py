"""Real models, built from code or configs with random init and fixed seeds: nothing is downloaded.

One list of builders serves the `real` benchmark suite (benchmarks/workloads/real.py) and the
frontend tests (packages/stax-frontend/tests/test_real_models.py), so the tests check exactly
the models the benchmark times, at smaller sizes, and compile the same training step
(`program`). This file imports only torch, timm and transformers (and its sibling
torchvision_shim.py), never the `benchmarks` package, so the tests load it by file path
without putting the repository's benchmarks on sys.path.

Models: from timm resnet18, resnet50, mobilenetv3_small_100, convnext_atto,
vit_tiny_patch16_224 (`pretrained=False`); from transformers a BERT encoder (BertModel), a
GPT-2 decoder (GPT2LMHeadModel), a T5 encoder-decoder (T5ForConditionalGeneration) and a Llama
decoder (LlamaForCausalLM with grouped-query attention, 8 query heads over 2 key/value heads,
and RoPE), all from small configs; and torch's nn.TransformerEncoderLayer. Attention runs
through `attn_implementation="sdpa"` (torch's scaled_dot_product_attention). Dropout is 0
everywhere, so a training step is deterministic and comparable with eager.

Sizes come in presets: `test` (seconds per model in the tests: a 64 px image batch of 2 or
16 tokens, 2-layer text configs, and fewer repeated blocks — one per stage of resnet50,
convnext_atto and mobilenetv3, 2 ViT blocks: repeats add compile time, not coverage),
`quick` (the benchmark's --quick), `cpu` (a few samples: batch 2-4 at 224 px, sequences of
128) and `cuda` (a batch that keeps an H200 busy: 64 images, 32 x 256 tokens, wider and
deeper text configs).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

# no download can happen, whatever a config or a code path would like to fetch
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

ATTN_IMPLEMENTATION = "sdpa"
LR = 0.01  # the training step's SGD (PyTorch's dynamo benchmark runner: SGD, lr 0.01, foreach)
PRESETS = ("test", "quick", "cpu", "cuda")

# per preset: (batch, image px) for timm models, (batch, tokens) and the text config's size
IMAGE = {"test": (2, 64), "quick": (2, 128), "cpu": (4, 224), "cuda": (64, 224)}
IMAGE_BIG = {"test": (2, 64), "quick": (2, 128), "cpu": (2, 224), "cuda": (64, 224)}  # resnet50
TEXT = {"test": (2, 16), "quick": (2, 64), "cpu": (2, 128), "cuda": (32, 256)}
# the test preset's block counts for the deep timm models (the cpu / cuda presets: the real ones)
TEST_DEPTH = {"resnet50": {"layers": (1, 1, 1, 1)}, "convnext_atto": {"depths": (1, 1, 1, 1)},
              "vit_tiny_patch16_224": {"depth": 2}, "mobilenetv3_small_100": {"depth_multiplier": 0.1}}
# hidden size, layers, heads, vocabulary
WIDTH = {"test": (64, 2, 4, 512), "quick": (256, 2, 4, 8192), "cpu": (256, 4, 4, 8192), "cuda": (512, 6, 8, 16384)}


@dataclass
class Sample:
    """One model with its seeded inputs: what a benchmark workload or a test needs.

    `output(model, *inputs)` is what inference returns (logits or hidden states);
    `loss(model, *inputs, *targets)` is the scalar a training step differentiates.
    """

    name: str
    model: nn.Module
    inputs: tuple
    targets: tuple
    output: Callable
    loss: Callable
    shape: str  # e.g. "batch 4, 3x224x224" or "batch 2 x 128 tokens"


@dataclass(frozen=True)
class RealModel:
    name: str
    family: str  # timm, transformers or torch
    make: Callable[[str], Sample]  # preset -> Sample on the CPU in float32
    quick: bool = False  # part of the --quick subset
    about: str = ""


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(1)


def ensure_timm():
    """`import timm`, through the torchvision stand-in where torchvision cannot load (torchvision_shim.py)."""
    return _sibling("torchvision_shim").import_timm()


def torchvision_status() -> str | None:
    """Which torchvision timm imported: 'real torchvision X' or 'stub (why)'; None before any timm model."""
    return _sibling("torchvision_shim").status()


def _sibling(name: str):
    """A module next to this file, found whether this file was imported as part of the benchmarks
    package or loaded by path (the frontend tests): one module object either way."""
    pkg = __name__.rpartition(".")[0]
    full = f"{pkg}.{name}" if pkg else f"_stax_real_{name}"
    if full not in sys.modules:
        if pkg:
            importlib.import_module(full)
        else:
            load_by_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py"), full)
    return sys.modules[full]


def load_by_path(path: str, name: str):
    """Import the file at `path` as module `name` (registered in sys.modules)."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _seeded(build: Callable[[], nn.Module]) -> nn.Module:
    torch.manual_seed(0)
    return build()


# ---- timm: classification models on images ------------------------------------------------


def _timm(arch: str, sizes: dict, test_depth: dict | None = None, **kw) -> Callable[[str], Sample]:
    """`test_depth`: fewer repeated blocks at the test preset (timm's own model arguments): the
    repeats add compile time to a test, not coverage (every block type stays)."""

    def make(preset: str) -> Sample:
        timm = ensure_timm()
        batch, px = sizes[preset]
        depth = (test_depth or {}) if preset == "test" else {}
        model = _seeded(lambda: timm.create_model(arch, pretrained=False, drop_rate=0.0, **kw, **depth))
        g = _gen()
        x = torch.randn(batch, 3, px, px, generator=g)
        y = torch.randint(0, model.num_classes, (batch,), generator=g)
        return Sample(arch, model, (x,), (y,), lambda m, x: m(x), lambda m, x, y: F.cross_entropy(m(x), y),
                      f"batch {batch}, 3x{px}x{px}")

    return make


def _vit(preset: str) -> Sample:
    """vit_tiny_patch16_224 at the preset's image size (img_size: the position embedding follows it)."""
    batch, px = IMAGE[preset]
    return _timm("vit_tiny_patch16_224", {preset: (batch, px)}, TEST_DEPTH["vit_tiny_patch16_224"], img_size=px)(preset)


# ---- transformers: text models from small configs ------------------------------------------


def _tokens(preset: str, vocab: int, n: int = 1, length: int | None = None) -> tuple:
    batch, t = TEXT[preset]
    g = _gen()
    return tuple(torch.randint(0, vocab, (batch, length or t), generator=g) for _ in range(n))


def _quiet_transformers() -> None:
    """transformers logs config advice (e.g. 'loss_type=None ... using ForCausalLMLoss') at every build."""
    from transformers.utils import logging

    logging.set_verbosity_error()


def _bert(preset: str) -> Sample:
    from transformers import BertConfig, BertModel

    _quiet_transformers()
    d, layers, heads, vocab = WIDTH[preset]
    cfg = BertConfig(vocab_size=vocab, hidden_size=d, num_hidden_layers=layers, num_attention_heads=heads,
                     intermediate_size=4 * d, max_position_embeddings=512, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, attn_implementation=ATTN_IMPLEMENTATION)
    model = _seeded(lambda: BertModel(cfg, add_pooling_layer=False))
    (ids,) = _tokens(preset, vocab)
    target = torch.randn(*ids.shape, d, generator=_gen())
    return Sample("bert", model, (ids,), (target,), lambda m, ids: m(input_ids=ids).last_hidden_state,
                  lambda m, ids, tgt: F.mse_loss(m(input_ids=ids).last_hidden_state, tgt),
                  f"batch {ids.shape[0]} x {ids.shape[1]} tokens, d={d}, {layers} layers")


def _gpt2(preset: str) -> Sample:
    from transformers import GPT2Config, GPT2LMHeadModel

    _quiet_transformers()
    d, layers, heads, vocab = WIDTH[preset]
    cfg = GPT2Config(vocab_size=vocab, n_positions=512, n_embd=d, n_layer=layers, n_head=heads, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False, bos_token_id=vocab - 1, eos_token_id=vocab - 1,
                     attn_implementation=ATTN_IMPLEMENTATION)
    model = _seeded(lambda: GPT2LMHeadModel(cfg))
    (ids,) = _tokens(preset, vocab)
    return Sample("gpt2", model, (ids,), (), lambda m, ids: m(input_ids=ids, use_cache=False).logits,
                  lambda m, ids: m(input_ids=ids, labels=ids, use_cache=False).loss,
                  f"batch {ids.shape[0]} x {ids.shape[1]} tokens, d={d}, {layers} layers")


def _t5(preset: str) -> Sample:
    from transformers import T5Config, T5ForConditionalGeneration

    _quiet_transformers()
    d, layers, heads, vocab = WIDTH[preset]
    cfg = T5Config(vocab_size=vocab, d_model=d, d_kv=d // heads, d_ff=4 * d, num_layers=layers,
                   num_decoder_layers=layers, num_heads=heads, dropout_rate=0.0, use_cache=False,
                   decoder_start_token_id=0, pad_token_id=0, attn_implementation=ATTN_IMPLEMENTATION)
    model = _seeded(lambda: T5ForConditionalGeneration(cfg))
    t = TEXT[preset][1]
    src, tgt = _tokens(preset, vocab, 2, length=None)
    tgt = tgt[:, : max(t // 2, 8)].contiguous()  # decoder sequence: half the encoder's
    return Sample("t5", model, (src, tgt), (),
                  lambda m, src, tgt: m(input_ids=src, decoder_input_ids=tgt, use_cache=False).logits,
                  lambda m, src, tgt: m(input_ids=src, labels=tgt, use_cache=False).loss,
                  f"batch {src.shape[0]} x {src.shape[1]} -> {tgt.shape[1]} tokens, d={d}, {layers}+{layers} layers")


def _llama(preset: str) -> Sample:
    from transformers import LlamaConfig, LlamaForCausalLM

    _quiet_transformers()
    d, layers, heads, vocab = WIDTH[preset]
    q_heads, kv_heads = 2 * heads, heads // 2  # grouped-query attention: 4 query heads share one key/value head
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=d, intermediate_size=(8 * d) // 3 // 16 * 16,
                      num_hidden_layers=layers, num_attention_heads=q_heads, num_key_value_heads=kv_heads,
                      max_position_embeddings=512, attention_dropout=0.0, use_cache=False,
                      tie_word_embeddings=False, attn_implementation=ATTN_IMPLEMENTATION)
    model = _seeded(lambda: LlamaForCausalLM(cfg))
    (ids,) = _tokens(preset, vocab)
    return Sample("llama", model, (ids,), (), lambda m, ids: m(input_ids=ids, use_cache=False).logits,
                  lambda m, ids: m(input_ids=ids, labels=ids, use_cache=False).loss,
                  f"batch {ids.shape[0]} x {ids.shape[1]} tokens, d={d}, {layers} layers, "
                  f"GQA {q_heads}q/{kv_heads}kv heads, RoPE")


# ---- torch: the stock encoder layer ---------------------------------------------------------


def _encoder_layer(preset: str) -> Sample:
    d, _, heads, _ = WIDTH[preset]
    model = _seeded(lambda: nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, dropout=0.0, batch_first=True))
    batch, t = TEXT[preset]
    g = _gen()
    x, target = torch.randn(batch, t, d, generator=g), torch.randn(batch, t, d, generator=g)
    return Sample("transformer_encoder_layer", model, (x,), (target,), lambda m, x: m(x),
                  lambda m, x, tgt: F.mse_loss(m(x), tgt), f"batch {batch} x {t} tokens, d={d}")


def program(sample: Sample, train: bool, autocast: bool = False, device: str = "cpu"):
    """(fn, inputs, model): the function a backend compiles and its inputs. Inference: eval mode,
    `torch.no_grad()`, the model's output. Training: one step as PyTorch's dynamo benchmarks take
    it — gradients set to None, forward + loss, backward, `SGD(lr=0.01, foreach=True).step()` —
    returning the loss. `autocast`: the forward (and loss) under torch.autocast(bfloat16)."""
    model = sample.model
    amp = (lambda: torch.autocast(device.split(":")[0], dtype=torch.bfloat16)) if autocast else contextlib.nullcontext
    if not train:
        model.eval()

        def infer(*xs):
            with torch.no_grad(), amp():
                return sample.output(model, *xs)

        return infer, sample.inputs, model
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=LR, foreach=True)

    def train_step(*xs):
        opt.zero_grad(set_to_none=True)
        with amp():
            loss = sample.loss(model, *xs)
        loss.backward()
        opt.step()
        return loss.detach()

    return train_step, sample.inputs + sample.targets, model


MODELS: list[RealModel] = [
    RealModel("resnet18", "timm", _timm("resnet18", IMAGE), quick=True),
    RealModel("resnet50", "timm", _timm("resnet50", IMAGE_BIG, TEST_DEPTH["resnet50"])),
    RealModel("mobilenetv3_small_100", "timm",
              _timm("mobilenetv3_small_100", IMAGE, TEST_DEPTH["mobilenetv3_small_100"])),
    RealModel("convnext_atto", "timm", _timm("convnext_atto", IMAGE, TEST_DEPTH["convnext_atto"])),
    RealModel("vit_tiny_patch16_224", "timm", _vit, quick=True),
    RealModel("bert", "transformers", _bert, quick=True, about="BertModel, no pooler"),
    RealModel("gpt2", "transformers", _gpt2, about="GPT2LMHeadModel"),
    RealModel("t5", "transformers", _t5, about="T5ForConditionalGeneration"),
    RealModel("llama", "transformers", _llama, quick=True, about="LlamaForCausalLM, GQA, RoPE"),
    RealModel("transformer_encoder_layer", "torch", _encoder_layer, about="nn.TransformerEncoderLayer"),
]


def by_name(name: str) -> RealModel:
    for m in MODELS:
        if m.name == name:
            return m
    raise KeyError(f"no real model {name!r}; choose from {', '.join(m.name for m in MODELS)}")


def build(name: str, preset: str, device: str = "cpu", dtype: torch.dtype = torch.float32) -> Sample:
    """The seeded model and inputs of `name` at `preset` sizes, moved to `device`; floating-point
    parameters, buffers and inputs in `dtype` (token ids and labels stay integers)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose from {PRESETS}")
    s = by_name(name).make(preset)
    s.model = s.model.to(device=device, dtype=dtype)

    def move(t: torch.Tensor) -> torch.Tensor:
        return t.to(device=device, dtype=dtype) if t.is_floating_point() else t.to(device)

    s.inputs, s.targets = tuple(map(move, s.inputs)), tuple(map(move, s.targets))
    return s
