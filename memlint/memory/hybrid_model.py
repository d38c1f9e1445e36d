"""Hybrid and linear-attention language models read from their HF config: which token mixer and
which feed-forward block each layer has, and the exact parameters of each layer.

`hybrid_layout(config, model_type)` returns a `Layout` for the model types in `HYBRID_MODEL_TYPES`:
one `HybridLayer` per decoder layer (mixer kind and its record from memory/mixers.py, the FFN kind)
and a `ParamCounts` whose totals equal `sum(p.numel() for p in model.parameters())` of the model
transformers 5.24 builds on the meta device from the same config (literal counts in
tests/memory/test_hybrid_params.py, recorded with bench/param_truth.py). In each `LayerParams`,
`attention` holds the layer's token mixer (attention, Mamba, Gated DeltaNet or short conv), so
the tensor-parallel split and the pipeline split treat every mixer alike.

The layer plan of each family, as its transformers config class derives it:
- nemotron_h: `hybrid_override_pattern` (M Mamba-2, * attention, - MLP, E MoE; one block per
  layer) or `layers_block_type`; squared-ReLU MLPs and experts (up and down only), MoE experts
  optionally in a latent space (`moe_latent_size`: fc1/fc2 latent projections around them);
- jamba: attention where i % attn_layer_period == attn_layer_offset, else Mamba-1; MoE where
  i % expert_layer_period == expert_layer_offset (and num_experts > 1), else a dense MLP;
- zamba2: Mamba-2 layers; "hybrid" layers add a transformer block shared by every
  num_mem_blocks-th hybrid layer (attention over [hidden, embeddings], 2·d wide, and a gated MLP
  with one LoRA adapter per hybrid layer on its gate/up projection) and a d×d linear;
- falcon_h1: attention and Mamba-2 side by side in every layer, then a gated MLP;
- bamba: Mamba-2 layers, attention at `attn_layer_indices`, a gated MLP in every layer;
- granitemoehybrid: `layer_types` (mamba / attention); every layer has a shared gated MLP
  (`shared_intermediate_size`) and, with num_local_experts > 0, routed experts;
- lfm2: `layer_types` (conv / full_attention) or `full_attn_idxs`; gated MLP in every layer
  (`block_auto_adjust_ff_dim` shrinks it to 2/3, times `block_ffn_dim_multiplier`, rounded up to
  `block_multiple_of`), q/k norms over head_dim, a final `embedding_norm`;
- mamba2: Mamba-2 layers only (norm + mixer), d_inner = expand · d;
- qwen3_next, qwen3_5(_moe) (their text_config): Gated DeltaNet layers and gated attention
  (q_proj twice as wide: query and output gate; q/k norms) every full_attention_interval-th
  layer; MoE as Qwen2-MoE (shared expert with a sigmoid gate) or, for qwen3_5, a dense MLP.
The vision tower of a Qwen3.5 checkpoint is not counted here (the language model only).
"""
from __future__ import annotations

from collections.abc import Mapping

from memlint.memory.architecture import (  # noqa: F401 - HYBRID_MODEL_TYPES: the types read here
    HYBRID_MODEL_TYPES, MAX_LAYERS, ConfigError, LayerParams, ParamCounts)
from memlint.memory.config_reader import ConfigReader
from memlint.memory.mixers import GatedDeltaNet, Mamba1, Mamba2, ShortConv
from memlint.records import record

TYPE_CHECKING = False   # start-up: typing is for the type checker only
if TYPE_CHECKING:
    from typing import Optional



@record(frozen=True)
class Attention:
    heads: int
    kv_heads: int
    head_dim: int
    width: int            # input width (zamba2: 2·d, the hidden state and the embeddings)
    bias: bool = False
    output_gate: bool = False  # qwen3_next / qwen3_5: q_proj also yields a sigmoid gate
    qk_norm: bool = False

    def params(self, d: int) -> int:
        q = self.heads * self.head_dim
        kv = self.kv_heads * self.head_dim
        q_out = 2 * q if self.output_gate else q
        p = self.width * (q_out + 2 * kv) + q * d
        if self.bias:
            p += q_out + 2 * kv + d
        if self.qk_norm:
            p += 2 * self.head_dim
        return p


@record(frozen=True)
class FFN:
    """A layer's feed-forward block: dense (`ffn`), routed experts, a shared expert."""

    kind: str                 # dense | moe | none
    ffn: int = 0              # dense intermediate size
    gated: bool = True        # gate, up, down (False: up, down: relu2 / GeLU)
    bias: bool = False
    experts: int = 0
    top_k: int = 0
    expert_ffn: int = 0
    shared_ffn: int = 0       # total intermediate of the shared expert(s)
    shared_gate: bool = False  # sigmoid Linear(d, 1) on the shared expert
    latent: int = 0           # nemotron_h moe_latent_size: experts work in this width
    act: str = "silu"         # the activation (nemotron_h: relu2)

    def parts(self, d: int) -> dict:
        mats = 3 if self.gated else 2
        if self.kind == "dense":
            p = mats * d * self.ffn + ((mats - 1) * self.ffn + d if self.bias else 0)
            return {"mlp": p}
        if self.kind != "moe":
            return {}
        width = self.latent or d
        experts = self.experts * mats * width * self.expert_ffn
        if self.latent:
            experts += 2 * d * self.latent  # fc1_latent_proj, fc2_latent_proj
        shared = mats * d * self.shared_ffn + (d if self.shared_gate else 0)
        return {"experts": experts, "shared_experts": shared, "router": d * self.experts}


@record(frozen=True)
class HybridLayer:
    mixer: str                       # attention | mamba2 | mamba1 | gdn | shortconv | parallel
    ffn: FFN
    ssm: Optional[object] = None     # the Mamba2 / Mamba1 / GatedDeltaNet / ShortConv record
    attention: Optional[Attention] = None
    params: Optional[LayerParams] = None
    stack: str = "decoder"                     # encoder | decoder (T5)
    cross_attention: Optional[Attention] = None  # T5 decoder layers: attention over the encoder


@record(frozen=True)
class Layout:
    model_type: str
    hidden: int
    vocab: int
    tied: bool
    layers: tuple            # HybridLayer per decoder layer
    counts: ParamCounts
    decoder_seq: int = 0     # T5: the decoder's sequence length (0: not given)

    @property
    def mixers(self) -> dict:
        """How many layers have each mixer kind."""
        out: dict = {}
        for layer in self.layers:
            out[layer.mixer] = out.get(layer.mixer, 0) + 1
        return out


def hybrid_layout(config: Mapping, model_type: str) -> Layout:
    """The layer plan and exact counts of a hybrid model. Raises ConfigError, nothing else."""
    if model_type in ("qwen3_5", "qwen3_5_moe") and isinstance(config.get("text_config"), Mapping):
        text = ConfigReader(config["text_config"], model_type, "text_config")
        top = ConfigReader(config, model_type)
        tied = text.bool("tie_word_embeddings", default=top.bool("tie_word_embeddings",
                                                                  default=False))
        return _build(text, model_type, tied)
    r = ConfigReader(config, model_type)
    return _build(r, model_type, None)


def _build(r: ConfigReader, fam: str, tied: Optional[bool]) -> Layout:
    d = r.int("hidden_size", "d_model", minimum=1)
    vocab = r.int("vocab_size", minimum=1)
    reader = _READERS[fam.replace("_text", "")]
    layers, extra = reader(r, d)
    if not layers or len(layers) > MAX_LAYERS:
        raise ConfigError(r.key("num_hidden_layers"), f"{len(layers)} layers is not a model")
    if tied is None:
        tied = r.bool("tie_word_embeddings", "tie_embedding",
                      default=fam in ("zamba2", "lfm2"))
    built = []
    for i, layer in enumerate(layers):
        parts = layer.ffn.parts(d)
        mixer = 0
        if layer.attention is not None:
            mixer += layer.attention.params(d)
        if layer.ssm is not None:
            mixer += layer.ssm.params(d)
        mixer += extra.get(("mixer", i), 0)
        norms = extra.get(("norms", i), 2 * d)
        params = extra.get(("params", i)) or LayerParams(attention=mixer, norms=norms, **parts)
        built.append(HybridLayer(layer.mixer, layer.ffn, layer.ssm, layer.attention, params))
    counts = ParamCounts(embedding=vocab * d, position_embedding=0,
                         lm_head=0 if tied else vocab * d, final_norm=d, layers=tuple(
                             layer.params for layer in built))
    return Layout(model_type=fam, hidden=d, vocab=vocab, tied=tied, layers=tuple(built),
                  counts=counts)


# ---------------------------------------------------------------------------- family readers
# Each returns (layers, extra): HybridLayer records without params, and per-layer extras
# {("mixer", i): parameters, ("norms", i): norm parameters} where they differ from the plain
# two-norm layer.

def _mamba2(r: ConfigReader, d: int, *, heads: str, head_dim: str, groups: str, state: str,
            conv: str, d_inner: Optional[int] = None, conv_bias: str = "use_conv_bias",
            proj_bias: str = "use_bias", out_bias: Optional[str] = None,
            gated_norm: bool = True, chunk: str = "chunk_size", chunk_default: int = 256) -> Mamba2:
    h = r.int(*heads.split("|"), minimum=1)
    p = r.int(*head_dim.split("|"), minimum=1)
    proj = r.bool(*proj_bias.split("|"), default=False)
    return Mamba2(d_inner=d_inner if d_inner is not None else h * p, heads=h, head_dim=p,
                  groups=r.int(*groups.split("|"), minimum=1),
                  state=r.int(*state.split("|"), minimum=1),
                  conv_kernel=r.int(*conv.split("|"), minimum=1),
                  conv_bias=r.bool(*conv_bias.split("|"), default=True), proj_bias=proj,
                  out_bias=r.bool(out_bias, default=False) if out_bias else proj,
                  gated_norm=gated_norm,
                  chunk=r.int(*chunk.split("|"), default=chunk_default, minimum=1))


def _attention(r: ConfigReader, d: int, head_dim_default: Optional[int] = None, **kw) -> Attention:
    heads = r.int("num_attention_heads", minimum=1)
    kv = r.int("num_key_value_heads", default=heads, minimum=1)
    hd = r.int("head_dim", default=head_dim_default or d // heads, minimum=1)
    kw.setdefault("bias", r.bool("attention_bias", default=False))
    return Attention(heads=heads, kv_heads=kv, head_dim=hd, width=kw.pop("width", d), **kw)


def _nemotron_h(r: ConfigReader, d: int):
    pattern = r.data.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern:
        symbols = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
        bad = sorted(set(pattern) - set(symbols))
        if bad:
            raise ConfigError(r.key("hybrid_override_pattern"),
                              f"unknown layer symbol(s) {''.join(bad)!r} in hybrid_override_pattern")
        kinds = [symbols[c] for c in pattern]
    else:
        raw = r.raw("layers_block_type", "layer_types")
        names = {"linear_attention": "mamba", "mamba": "mamba", "full_attention": "attention",
                 "attention": "attention", "mlp": "mlp", "moe": "moe"}
        if not isinstance(raw, list) or any(not isinstance(k, str) or k not in names for k in raw):
            raise ConfigError(r.key("layers_block_type"),
                              "layers_block_type must list mamba/attention/mlp/moe layers")
        kinds = [names[k] for k in raw]
    mixer = _mamba2(r, d, heads="mamba_num_heads", head_dim="mamba_head_dim",
                    groups="n_groups|mamba_n_groups", state="ssm_state_size",
                    conv="conv_kernel|mamba_d_conv", conv_bias="use_conv_bias|mamba_conv_bias",
                    proj_bias="use_bias", chunk="chunk_size|mamba_chunk_size", chunk_default=128)
    act = r.str("mlp_hidden_act", default="relu2")
    heads = r.int("num_attention_heads", minimum=1)
    hd = r.int("head_dim", "attention_head_dim", default=128, minimum=1)
    attn = Attention(heads=heads, kv_heads=r.int("num_key_value_heads", default=heads, minimum=1),
                     head_dim=hd, width=d, bias=r.bool("attention_bias", default=False))
    mlp_bias = r.bool("mlp_bias", default=False)
    layers = []
    for kind in kinds:
        if kind == "mamba":
            layers.append(HybridLayer("mamba2", FFN("none"), ssm=mixer))
        elif kind == "attention":
            layers.append(HybridLayer("attention", FFN("none"), attention=attn))
        elif kind == "mlp":
            layers.append(HybridLayer("none", FFN("dense", ffn=r.int("intermediate_size", minimum=1),
                                                  gated=False, bias=mlp_bias, act=act)))
        else:
            n_shared = r.int("n_shared_experts", default=1)
            layers.append(HybridLayer("none", FFN(
                "moe", gated=False, act=act, experts=r.int("n_routed_experts", "num_local_experts",
                                                   minimum=1),
                top_k=r.int("num_experts_per_tok", minimum=1),
                expert_ffn=r.int("moe_intermediate_size", minimum=1),
                shared_ffn=n_shared and r.int("moe_shared_expert_intermediate_size", minimum=1),
                latent=r.int("moe_latent_size", default=0) or 0)))
    return layers, {("norms", i): d for i in range(len(layers))}


def _jamba(r: ConfigReader, d: int):
    n = r.int("num_hidden_layers", minimum=1)
    _check_layers(r, n)
    a_period = r.int("attn_layer_period", default=8, minimum=1)
    a_offset = r.int("attn_layer_offset", default=4)
    e_period = r.int("expert_layer_period", default=2, minimum=1)
    e_offset = r.int("expert_layer_offset", default=1)
    experts = r.int("num_experts", default=16, minimum=1)
    e = r.int("mamba_expand", default=2, minimum=1) * d
    rank = r.raw("mamba_dt_rank", default=256)
    rank = -(-d // 16) if rank == "auto" else r.int("mamba_dt_rank", default=256, minimum=1)
    mixer = Mamba1(d_inner=e, state=r.int("mamba_d_state", default=16, minimum=1),
                   conv_kernel=r.int("mamba_d_conv", default=4, minimum=1), dt_rank=rank,
                   conv_bias=r.bool("mamba_conv_bias", default=True),
                   proj_bias=r.bool("mamba_proj_bias", default=False))
    ffn = r.int("intermediate_size", minimum=1)
    attn = _attention(r, d, bias=False)
    layers = []
    for i in range(n):
        moe = experts > 1 and i % e_period == e_offset
        block = FFN("moe", experts=experts, top_k=r.int("num_experts_per_tok", default=2),
                    expert_ffn=ffn) if moe else FFN("dense", ffn=ffn)
        if i % a_period == a_offset:
            layers.append(HybridLayer("attention", block, attention=attn))
        else:
            layers.append(HybridLayer("mamba1", block, ssm=mixer))
    return layers, {}


def _zamba2(r: ConfigReader, d: int):
    types = r.raw("layers_block_type", "layer_types")
    if not isinstance(types, list) or any(t not in ("mamba", "hybrid", "linear_attention")
                                          for t in types):
        raise ConfigError(r.key("layers_block_type"),
                          "layers_block_type must list mamba / hybrid layers")
    expand = r.int("mamba_expand", default=2, minimum=1)
    heads = r.int("n_mamba_heads", default=8, minimum=1)
    bias = r.bool("add_bias_linear", default=False)
    mixer = Mamba2(d_inner=expand * d, heads=heads, head_dim=expand * d // heads,
                   groups=r.int("mamba_ngroups", default=1, minimum=1),
                   state=r.int("mamba_d_state", "state_size", default=64, minimum=1),
                   conv_kernel=r.int("mamba_d_conv", default=4, minimum=1),
                   conv_bias=r.bool("use_conv_bias", default=True), proj_bias=bias, out_bias=bias,
                   chunk=r.int("chunk_size", default=256, minimum=1))
    n_heads = r.int("num_attention_heads", minimum=1)
    width = 2 * d
    attn = Attention(heads=n_heads, kv_heads=r.int("num_key_value_heads", default=n_heads,
                                                   minimum=1),
                     head_dim=width // n_heads, width=width)
    ffn = r.int("intermediate_size", default=4 * d, minimum=1)
    blocks = r.int("num_mem_blocks", default=1, minimum=1)
    rank = r.int("adapter_rank", default=128, minimum=1)
    attn_adapters = r.bool("use_shared_attention_adapter", default=False)
    # one shared block: attention (+ its norm over 2d), the gated MLP (+ pre-FF norm)
    block = attn.params(d) + width + 3 * d * ffn + (2 * ffn + d if bias else 0) + d
    adapter = rank * (d + 2 * ffn) + (3 * rank * 2 * width if attn_adapters else 0)
    layers, extra, hybrid = [], {}, 0
    shared_mlp = FFN("dense", ffn=ffn, bias=bias)
    for i, kind in enumerate(types):
        if kind == "hybrid":
            # the shared block runs in this layer (its activations are this layer's), but its
            # parameters belong to the first num_mem_blocks hybrid layers only
            shared = block if hybrid < blocks else 0
            extra[("params", i)] = LayerParams(
                attention=mixer.params(d) + shared + adapter + d * d, norms=d)
            layers.append(HybridLayer("mamba2", shared_mlp, ssm=mixer, attention=attn))
            hybrid += 1
        else:
            layers.append(HybridLayer("mamba2", FFN("none"), ssm=mixer))
        extra[("norms", i)] = d
    return layers, extra


def _falcon_h1(r: ConfigReader, d: int):
    n = r.int("num_hidden_layers", minimum=1)
    _check_layers(r, n)
    d_ssm = r.raw("mamba_d_ssm", required=False)
    d_inner = r.int("mamba_d_ssm", minimum=1) if d_ssm is not None else int(
        r.number("mamba_expand", default=2) * d)
    mixer = _mamba2(r, d, heads="mamba_n_heads", head_dim="mamba_d_head",
                    groups="mamba_n_groups", state="mamba_d_state", conv="mamba_d_conv",
                    d_inner=d_inner, conv_bias="mamba_conv_bias", proj_bias="mamba_proj_bias",
                    out_bias="projectors_bias",
                    gated_norm=r.bool("mamba_rms_norm", default=False),
                    chunk="mamba_chunk_size", chunk_default=256)
    attn = _attention(r, d)
    ffn = FFN("dense", ffn=r.int("intermediate_size", minimum=1),
              bias=r.bool("mlp_bias", default=False))
    return [HybridLayer("parallel", ffn, ssm=mixer, attention=attn) for _ in range(n)], {}


def _bamba(r: ConfigReader, d: int):
    n = r.int("num_hidden_layers", minimum=1)
    _check_layers(r, n)
    attn_at = set(r.int_list("attn_layer_indices")) if r.data.get("attn_layer_indices") else set()
    mixer = _mamba2(r, d, heads="mamba_n_heads", head_dim="mamba_d_head",
                    groups="mamba_n_groups", state="mamba_d_state", conv="mamba_d_conv",
                    conv_bias="mamba_conv_bias", proj_bias="mamba_proj_bias",
                    chunk="mamba_chunk_size")
    mixer = Mamba2(**{**mixer.__dict__, "d_inner": r.int("mamba_expand", default=2) * d})
    attn = _attention(r, d)
    ffn = FFN("dense", ffn=r.int("intermediate_size", minimum=1),
              bias=r.bool("mlp_bias", default=False))
    return _alternate([i in attn_at for i in range(n)], attn, "mamba2", mixer, ffn), {}


def _granitemoehybrid(r: ConfigReader, d: int):
    types = r.raw("layer_types", "layers_block_type")
    if not isinstance(types, list) or any(t not in ("mamba", "attention") for t in types):
        raise ConfigError(r.key("layer_types"), "layer_types must list mamba / attention layers")
    mixer = _mamba2(r, d, heads="mamba_n_heads", head_dim="mamba_d_head",
                    groups="mamba_n_groups", state="mamba_d_state", conv="mamba_d_conv",
                    conv_bias="mamba_conv_bias", proj_bias="mamba_proj_bias",
                    chunk="mamba_chunk_size")
    mixer = Mamba2(**{**mixer.__dict__, "d_inner": r.int("mamba_expand", default=2) * d})
    attn = _attention(r, d)
    experts = r.int("num_local_experts", default=0)
    shared = r.int("shared_intermediate_size", minimum=1)
    if experts:
        ffn = FFN("moe", experts=experts, top_k=r.int("num_experts_per_tok", minimum=1),
                  expert_ffn=r.int("intermediate_size", minimum=1), shared_ffn=shared)
    else:
        ffn = FFN("dense", ffn=shared)
    return _alternate([t == "attention" for t in types], attn, "mamba2", mixer, ffn), {}


def _lfm2(r: ConfigReader, d: int):
    n = r.int("num_hidden_layers", minimum=1)
    _check_layers(r, n)
    types = r.data.get("layer_types")
    if types is None:
        full = set(r.int_list("full_attn_idxs"))
        types = ["full_attention" if i in full else "conv" for i in range(n)]
    if not isinstance(types, list) or any(t not in ("conv", "full_attention") for t in types):
        raise ConfigError(r.key("layer_types"), "layer_types must list conv / full_attention")
    ffn = r.int("intermediate_size", "block_ff_dim", minimum=1)
    if r.bool("block_auto_adjust_ff_dim", default=True):
        ffn = int(2 * ffn / 3)
        mult = r.raw("block_ffn_dim_multiplier", default=1.0)
        if mult is not None:
            ffn = int(r.number("block_ffn_dim_multiplier", default=1.0) * ffn)
            m = r.int("block_multiple_of", default=256, minimum=1)
            ffn = m * ((ffn + m - 1) // m)
    conv = ShortConv(kernel=r.int("conv_L_cache", default=3, minimum=1),
                     bias=r.bool("conv_bias", default=False))
    attn = _attention(r, d, bias=False, qk_norm=True)
    block = FFN("dense", ffn=ffn)
    return _alternate([t == "full_attention" for t in types], attn, "shortconv", conv, block), {}


def _mamba2_family(r: ConfigReader, d: int):
    n = r.int("num_hidden_layers", minimum=1)
    _check_layers(r, n)
    mixer = _mamba2(r, d, heads="num_heads", head_dim="head_dim", groups="n_groups",
                    state="state_size", conv="conv_kernel")
    mixer = Mamba2(**{**mixer.__dict__, "d_inner": int(r.number("expand", default=2) * d)})
    return [HybridLayer("mamba2", FFN("none"), ssm=mixer) for _ in range(n)], {
        ("norms", i): d for i in range(n)}


def _qwen_gdn(r: ConfigReader, d: int):
    n = r.int("num_hidden_layers", minimum=1)
    _check_layers(r, n)
    types = r.data.get("layer_types")
    if types is None:
        interval = r.int("full_attention_interval", default=4, minimum=1)
        types = ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(n)]
    if not isinstance(types, list) or len(types) != n or any(
            t not in ("linear_attention", "full_attention") for t in types):
        raise ConfigError(r.key("layer_types"),
                          "layer_types must list linear_attention / full_attention, one per layer")
    gdn = GatedDeltaNet(key_heads=r.int("linear_num_key_heads", default=16, minimum=1),
                        value_heads=r.int("linear_num_value_heads", default=32, minimum=1),
                        key_dim=r.int("linear_key_head_dim", default=128, minimum=1),
                        value_dim=r.int("linear_value_head_dim", default=128, minimum=1),
                        conv_kernel=r.int("linear_conv_kernel_dim", default=4, minimum=1))
    attn = _attention(r, d, head_dim_default=256, output_gate=True, qk_norm=True)
    experts = r.int("num_experts", default=0)
    moe_family = r.family.startswith(("qwen3_next", "qwen3_5_moe"))
    step = r.int("decoder_sparse_step", default=1, minimum=1)
    only = set(r.int_list("mlp_only_layers"))
    layers = []
    for i, t in enumerate(types):
        if moe_family and experts and i not in only and (i + 1) % step == 0:
            ffn = FFN("moe", experts=experts, top_k=r.int("num_experts_per_tok", minimum=1),
                      expert_ffn=r.int("moe_intermediate_size", minimum=1),
                      shared_ffn=r.int("shared_expert_intermediate_size", default=0),
                      shared_gate=True)
        else:
            ffn = FFN("dense", ffn=r.int("intermediate_size", minimum=1))
        layers.append(HybridLayer("attention", ffn, attention=attn) if t == "full_attention"
                      else HybridLayer("gdn", ffn, ssm=gdn))
    return layers, {}


def _alternate(is_attention: list, attn: Attention, kind: str, mixer, ffn: FFN) -> list:
    """Attention where `is_attention`, else the `kind` mixer; the same FFN in every layer."""
    return [HybridLayer("attention", ffn, attention=attn) if a
            else HybridLayer(kind, ffn, ssm=mixer) for a in is_attention]


def _check_layers(r: ConfigReader, n: int) -> None:
    if n > MAX_LAYERS:
        raise ConfigError(r.key("num_hidden_layers"), f"{n} decoder layers is not a model")


_READERS = {
    "nemotron_h": _nemotron_h, "jamba": _jamba, "zamba2": _zamba2, "falcon_h1": _falcon_h1,
    "bamba": _bamba, "granitemoehybrid": _granitemoehybrid, "lfm2": _lfm2,
    "mamba2": _mamba2_family, "qwen3_next": _qwen_gdn, "qwen3_5": _qwen_gdn,
    "qwen3_5_moe": _qwen_gdn,
}
