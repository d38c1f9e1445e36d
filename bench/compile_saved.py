"""Measure what one torchtitan-style Llama-3 block keeps for its backward, eager vs torch.compile.

Run with a PyTorch install of its own (never a memlint dependency), e.g.
    python3 -m venv /tmp/t && /tmp/t/bin/pip install torch==2.13.0
    /tmp/t/bin/python bench/compile_saved.py --out bench/data/compile/saved_llama_block.json

What is built (our own code, after torchtitan's model at 9dec370, torchtitan/models/llama/model.py
and models/norms.py; the same op graph at e7c0cae): RMSNorm (`x.float()` normalized, `type_as`,
times the weight), q/k/v/o linears without bias, RoPE through `view_as_complex` and a complex64
freqs table, `repeat_kv` by expand+reshape, `F.scaled_dot_product_attention(is_causal=True)`,
SwiGLU `w2(silu(w1(x)) * w3(x))`, two residual adds. Width is scaled down (d 256, 8 heads, 2 KV
heads, ffn 3.5 d: the 8B's ratios); parameters and inputs are bf16, as FSDP2's
MixedPrecisionPolicy(param_dtype=bf16) computes.

Activation checkpointing as torchtitan applies it (parallelisms/parallelize_llama.py @9dec370,
models/llama3/parallelize_llama.py @e7c0cae): `full` = checkpoint_wrapper(block); `op` = the
op-level selective policy (save mm, SDPA, reduce_scatter, abs, max outputs, except every second mm
of a block); `none`. Compiled = torch.compile(checkpoint_wrapper(block), fullgraph=True), what
apply_compile does after apply_ac. On the CPU, SDPA runs as
aten._scaled_dot_product_flash_attention_for_cpu, which the policy's list does not name; the
policy here treats it as the GPU's aten._scaled_dot_product_flash_attention (both return the output
and an fp32 log-sum-exp), so the CPU graph is saved as the GPU graph would be.

Measured per block, in bytes per token per hidden unit (bytes / (b·s·d)):
- `live`: bytes the forward leaves allocated besides its output (the CPU allocator's events under
  torch.profiler(profile_memory=True), which Inductor's kernels' buffers also go through): what the
  block holds for its backward. Parameters and the freqs table are allocated before and excluded.
- `saved`: the same, named per tensor: eager without AC through saved_tensors_hooks (dedup by
  storage, each storage named by the op that made it); eager SAC through the policy's MUST_SAVE
  outputs plus the checkpoint's input; compiled through the min-cut partitioner's forward graph
  outputs (torch/_functorch/partitioners.py), i.e. the tensors AOTAutograd's CompiledFunction saves.
  `live` validates `saved` for each case.
- `fwd_transient`: the forward's highest live bytes above what it leaves (the temporaries a caching
  allocator must hold at once inside one block's forward).
- `bwd_peak`: the block's backward, its highest live bytes above its start (what it holds and
  the output's gradient): the recomputed tensors, the gradients it writes (the input's included;
  the weights' gradients exist before) and their temporaries.
- `fsdp2`: four op-SAC blocks under FSDP2 (rank 0 of 8 on the fake process group), bf16 linears
  eager and compiled, and with --float8 torchao float8 linears with bf16 and float8 all-gathers:
  the bytes held per layer after the forward (the unsharded weights are freed by FSDP2).
- `--float8-sac OUT` (with --float8): eager op-SAC float8 blocks under both torchtitan save lists
  (9dec370's with aten.abs, e7c0cae's without), tensorwise and rowwise, alone and under FSDP2
  with bf16 and float8 all-gathers (bench/data/compile/float8_sac.torch-2.13.json).
"""
from __future__ import annotations

import argparse
import collections
import json
import platform
import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

DIM, HEADS, KV_HEADS, FFN = 256, 8, 2, 896
BATCH, SEQ = 2, 512
DTYPE = torch.bfloat16


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        out = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x)
        return out * self.weight


def rope(xq, xk, freqs):
    q = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    k = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    f = freqs[: xq.shape[1]].view(1, xq.shape[1], 1, q.shape[-1])
    return (torch.view_as_real(q * f).flatten(3).type_as(xq),
            torch.view_as_real(k * f).flatten(3).type_as(xk))


def expand_heads(x, rep):
    b, s, h, d = x.shape
    return x if rep == 1 else x[:, :, :, None, :].expand(b, s, h, rep, d).reshape(b, s, h * rep, d)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.hd = DIM // HEADS
        self.wq = nn.Linear(DIM, HEADS * self.hd, bias=False)
        self.wk = nn.Linear(DIM, KV_HEADS * self.hd, bias=False)
        self.wv = nn.Linear(DIM, KV_HEADS * self.hd, bias=False)
        self.wo = nn.Linear(HEADS * self.hd, DIM, bias=False)
        self.w1 = nn.Linear(DIM, FFN, bias=False)
        self.w2 = nn.Linear(FFN, DIM, bias=False)
        self.w3 = nn.Linear(DIM, FFN, bias=False)
        self.attention_norm = RMSNorm(DIM)
        self.ffn_norm = RMSNorm(DIM)

    def attention(self, x, freqs):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, -1, self.hd)
        k = self.wk(x).view(b, s, -1, self.hd)
        v = self.wv(x).view(b, s, -1, self.hd)
        q, k = rope(q, k, freqs)
        k, v = expand_heads(k, HEADS // KV_HEADS), expand_heads(v, HEADS // KV_HEADS)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=True)
        return self.wo(o.transpose(1, 2).contiguous().view(b, s, -1))

    def forward(self, x, freqs):
        h = x + self.attention(self.attention_norm(x), freqs)
        return h + self.w2(F.silu(self.w1(self.ffn_norm(h))) * self.w3(self.ffn_norm(h)))


def freqs_table(seq):
    inv = 1.0 / (10000.0 ** (torch.arange(0, DIM // HEADS, 2).float() / (DIM // HEADS)))
    ang = torch.outer(torch.arange(seq).float(), inv)
    return torch.polar(torch.ones_like(ang), ang)


# torchtitan's op-level SAC list (parallelize_llama.py _save_list), plus the CPU's flash kernel.
# aten.abs was in it from bcebc0de5 (2024-11-26, 9dec370's) to 88247277c (2025-02-06, "Remove abs
# from save list for per op AC ... float8"); e7c0cae's list has max but not abs.
aten = torch.ops.aten
SAVE_LIST_E7C0CAE = {aten.mm.default, aten._scaled_dot_product_efficient_attention.default,
                     aten._scaled_dot_product_flash_attention.default,
                     aten._scaled_dot_product_flash_attention_for_cpu.default,
                     torch.ops._c10d_functional.reduce_scatter_tensor.default,
                     aten.max.default}
SAVE_LIST_9DEC370 = SAVE_LIST_E7C0CAE | {aten.abs.default}
SAVE_LISTS = {"9dec370": SAVE_LIST_9DEC370, "e7c0cae": SAVE_LIST_E7C0CAE}
SAVE_LIST = set(SAVE_LIST_9DEC370)  # the list the measurements use (set_save_list changes it)


def set_save_list(name):
    SAVE_LIST.clear()
    SAVE_LIST.update(SAVE_LISTS[name])
SAC_LOG: list = []  # (func, MUST_SAVE?) per forward-mode call, for the per-op table


def op_policy_context():
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
    meta = collections.defaultdict(int)

    def policy(ctx, func, *args, **kwargs):
        mode = "recompute" if ctx.is_recompute else "forward"
        if func == aten.mm.default:
            meta[mode] += 1
        save = func in SAVE_LIST and not (func == aten.mm.default and meta[mode] % 2 == 0)
        if not ctx.is_recompute:
            out = getattr(ctx, "op_output", None)  # torch >= 2.5 hands the policy the output
            outs = out if isinstance(out, (tuple, list)) else (out,)
            SAC_LOG.append((str(func), save, meta[mode] if func == aten.mm.default else 0,
                            [t for t in outs if save and isinstance(t, torch.Tensor)]))
        return CheckpointPolicy.MUST_SAVE if save else CheckpointPolicy.PREFER_RECOMPUTE
    return create_selective_checkpoint_contexts(policy)


def wrap(block, ac):
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    if ac == "none":
        return block
    if ac == "full":
        return checkpoint_wrapper(block, preserve_rng_state=False)
    return checkpoint_wrapper(block, context_fn=op_policy_context, preserve_rng_state=False)


def profiled_forward(fn):
    """Run fn() under the profiler's memory events; return (result, net bytes, peak bytes)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = fn()
    events = sorted((e for e in prof.profiler.kineto_results.events()
                     if e.name() == "[memory]"), key=lambda e: e.start_ns())
    cur = peak = 0
    for e in events:
        cur += e.nbytes()
        peak = max(peak, cur)
    return out, cur, peak


class Producers(TorchDispatchMode):
    """Names each output storage by the aten op that made it (for the eager per-op table)."""
    def __init__(self):
        super().__init__()
        self.by_ptr = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in (out if isinstance(out, (tuple, list)) else (out,)):
            if isinstance(t, torch.Tensor):
                self.by_ptr.setdefault(t.untyped_storage().data_ptr(), str(func.overloadpacket.__name__))
        return out


CAPTURED: list = []  # the partitioner's forward graphs, to name the compiled block's saved tensors


def capture_partitioner():
    """Keep each forward graph Inductor's min-cut partitioner returns (its outputs past the
    forward's own are the values saved for backward, in CompiledFunction's save order)."""
    import torch._inductor.compile_fx as cfx
    real = cfx.min_cut_rematerialization_partition

    def spy(joint, inputs, **kw):
        fw, bw = real(joint, inputs, **kw)
        CAPTURED.append((fw, kw.get("num_fwd_outputs")))
        return fw, bw
    cfx.min_cut_rematerialization_partition = spy


def compiled_backward_node(out):
    fn = out.grad_fn
    while fn is not None and "CompiledFunction" not in fn.name():
        fn = fn.next_functions[0][0] if fn.next_functions else None
    return fn


def kind_of(t, x, params, freqs):
    ptr = t.untyped_storage().data_ptr()
    if ptr == x.untyped_storage().data_ptr():
        return "block input"
    if ptr in params:
        return "parameter"
    if ptr == freqs.untyped_storage().data_ptr():
        return "freqs table"
    return "activation"


def per_unit(nbytes):
    return round(nbytes / (BATCH * SEQ * DIM), 4)


def float8_config(recipe=None, all_gather=False):
    """torchao's Float8LinearConfig as torchtitan's float8 converter builds it: the default
    (tensorwise dynamic scaling) or `Float8LinearConfig.from_recipe_name(recipe)`."""
    from torchao.float8 import Float8LinearConfig
    if recipe and recipe != "tensorwise":
        return Float8LinearConfig.from_recipe_name(recipe)
    return Float8LinearConfig(enable_fsdp_float8_all_gather=all_gather)


def measure(ac, compiled, float8=False, seed=0, recipe=None):
    """One block's forward: what it leaves allocated for its backward, named per tensor.
    `float8`: the block's linears converted by torchao's convert_to_float8_training (tensorwise
    dynamic scaling, as torchtitan's float8 converter, or `recipe`; torchao must be
    importable)."""
    torch.manual_seed(seed)
    block = Block().to(DTYPE)
    if float8:
        from torchao.float8 import convert_to_float8_training
        convert_to_float8_training(block, config=float8_config(recipe))
    freqs = freqs_table(SEQ)
    mod = wrap(block, ac)
    if compiled:
        mod = torch.compile(mod, fullgraph=True)
    x = torch.randn(BATCH, SEQ, DIM, dtype=DTYPE, requires_grad=True)
    params = {p.untyped_storage().data_ptr() for p in block.parameters()}
    fixed = params | {freqs.untyped_storage().data_ptr()}
    first = len(CAPTURED)
    if compiled:  # compile (forward and backward) outside the measured forward
        mod(x, freqs).float().sum().backward()
        assert len(CAPTURED) == first + 1, "one partitioned graph per compiled block"
        x.grad = None
        block.zero_grad(set_to_none=True)
    for p in block.parameters():  # weight gradients exist before (FSDP2's, counted apart)
        p.grad = torch.zeros_like(p)
    SAC_LOG.clear()
    producers = Producers()
    packed = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in fixed and ptr not in packed:
            packed[ptr] = t
        return t

    def run():
        if not compiled and ac == "none":
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), producers:
                return mod(x, freqs)
        return mod(x, freqs)

    out, net, peak = profiled_forward(run)
    live = net - out.untyped_storage().nbytes()
    items = []
    if compiled:
        fw, n_out = CAPTURED[first]
        names = [n for n in list(fw.graph.find_nodes(op="output"))[0].args[0][n_out:]
                 if isinstance(n.meta.get("val"), torch.Tensor)]
        saved = compiled_backward_node(out).saved_tensors
        assert len(names) == len(saved), (len(names), len(saved))
        for node, t in zip(names, saved):
            kind = kind_of(t, x, params, freqs)
            if kind in ("parameter", "freqs table"):
                continue  # FSDP's unsharded weights and the model's buffer, not activations
            items.append({"what": kind, "node": node.name,
                          "op": getattr(node.target, "__name__", str(node.target)).split(".")[0],
                          "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
                          "bytes": t.untyped_storage().nbytes()})
    elif ac == "none":
        for ptr, t in packed.items():
            items.append({"what": kind_of(t, x, params, freqs), "node": "",
                          "op": producers.by_ptr.get(ptr, "input"),
                          "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
                          "bytes": t.untyped_storage().nbytes()})
    else:
        # torch/utils/checkpoint.py (non-reentrant): the frame keeps the block's inputs to
        # rerun it; under the op policy, _CachingTorchDispatchMode also stores the output of
        # every MUST_SAVE op of the forward, read back or not.
        items.append({"what": "block input", "node": "checkpoint input", "op": "input",
                      "dtype": "bfloat16", "shape": list(x.shape),
                      "bytes": x.untyped_storage().nbytes()})
        for func, save, mm_i, outs in SAC_LOG:
            if save and not outs:  # a torch whose policy context has no op_output
                items.append({"what": "activation", "node": f"mm #{mm_i}" if mm_i else "",
                              "op": func.split(".")[1], "dtype": "", "shape": [],
                              "bytes": None})
            if save:
                for t in outs:
                    items.append({"what": "activation", "node": f"mm #{mm_i}" if mm_i else "",
                                  "op": func.split(".")[1],
                                  "dtype": str(t.dtype).replace("torch.", ""),
                                  "shape": list(t.shape), "bytes": t.untyped_storage().nbytes()})
    grad = torch.ones_like(out)
    _, _, bwd_peak = profiled_forward(lambda: out.backward(grad))  # the saved set serves it
    holds_x = any(i["what"] == "block input" for i in items)
    held = live + (x.untyped_storage().nbytes() if holds_x else 0)
    named = sum(i["bytes"] or 0 for i in items)
    return {"ac": ac, "compiled": compiled, "float8": float8,
            **({"recipe": recipe or "tensorwise"} if float8 else {}),
            "held_bytes": held, "held_per_token_hidden": per_unit(held),
            "named_bytes": named if all(i["bytes"] is not None for i in items) else None,
            "fwd_transient_bytes": peak - net,
            "fwd_transient_per_token_hidden": per_unit(peak - net),
            "bwd_peak_bytes": bwd_peak, "bwd_peak_per_token_hidden": per_unit(bwd_peak),
            "tensors": [dict(i, per_token_hidden=None if i["bytes"] is None
                             else per_unit(i["bytes"])) for i in items]}


def measure_fsdp(linears, compiled, ranks=8, layers=4, recipe=None):
    """Blocks as torchtitan runs them: op-level SAC, then torch.compile, then FSDP2
    fully_shard per block and at the root (MixedPrecisionPolicy bf16 params, fp32 reduce), rank 0
    of `ranks` on the fake process group (collectives skipped, allocations real). `linears`:
    "bf16", "float8" (torchao float8 linears, bf16 all-gather) or "float8_all_gather" (torchao's
    enable_fsdp_float8_all_gather). Returns the bytes held per layer after the forward."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore
    if not dist.is_initialized():
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=ranks)
    mesh = init_device_mesh("cpu", (ranks,))
    torch.manual_seed(0)

    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([Block() for _ in range(layers)])

        def forward(self, x, freqs):
            for layer in self.layers:
                x = layer(x, freqs)
            return x

    model = Stack()
    if linears != "bf16":
        from torchao.float8 import convert_to_float8_training
        convert_to_float8_training(model, config=float8_config(
            recipe, all_gather=linears == "float8_all_gather"))
    for i, block in enumerate(model.layers):
        block = wrap(block, "op")
        model.layers[i] = torch.compile(block, fullgraph=True) if compiled else block
    policy = MixedPrecisionPolicy(param_dtype=DTYPE, reduce_dtype=torch.float32)
    for block in model.layers:
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    freqs = freqs_table(SEQ)
    x = torch.randn(BATCH, SEQ, DIM)  # fp32: FSDP2 casts the root's inputs to bf16
    model(x, freqs).float().sum().backward()  # compile; FSDP2's lazy init
    out, net, _ = profiled_forward(lambda: model(x, freqs))
    held = net - out.untyped_storage().nbytes()
    out.float().sum().backward()
    return {"linears": linears, "compiled": compiled, "ranks": ranks, "layers": layers,
            **({"recipe": recipe or "tensorwise"} if linears != "bf16" else {}),
            "held_per_layer_per_token_hidden": per_unit(held / layers)}


def loss_fn(pred, labels):
    """torchtitan's cross-entropy (components/loss.py cross_entropy_loss @e7c0cae)."""
    return F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))


def measure_loss(compiled, tokens=2048, vocab=8192):
    """The loss on bf16 logits: bytes per logit its forward keeps and its backward's peak."""
    fn = torch.compile(loss_fn) if compiled else loss_fn
    labels = torch.randint(0, vocab, (2, tokens // 2))
    pred = torch.randn(2, tokens // 2, vocab, dtype=DTYPE, requires_grad=True)
    if compiled:
        fn(pred, labels).backward()
        pred.grad = None
    loss, net, peak = profiled_forward(lambda: fn(pred, labels))
    _, bnet, bpeak = profiled_forward(lambda: loss.backward())
    unit = tokens * vocab
    return {"compiled": compiled, "fwd_held_per_logit": round(net / unit, 4),
            "fwd_peak_per_logit": round(peak / unit, 4),
            "bwd_peak_per_logit": round(bpeak / unit, 4),
            "grad_dtype": str(pred.grad.dtype).replace("torch.", ""),
            "note": "bytes per logit above the bf16 logits themselves (allocated before)"}


def bwd_scaling(out, float8):
    """The op-SAC block's backward peak per token per hidden unit at three token counts: what
    scales with the tokens (activation gradients, recomputed tensors) and what does not (weight
    sized: the float8 casts of the weights)."""
    global BATCH
    rows = []
    for batch in (2, 4, 8):
        BATCH = batch
        for compiled in (False, True):
            for f8 in ((False, True) if float8 else (False,)):
                torch._dynamo.reset()
                r = measure("op", compiled, float8=f8)
                rows.append({"batch": batch, "tokens": batch * SEQ, "compiled": compiled,
                             "float8": f8, "bwd_peak_bytes": r["bwd_peak_bytes"],
                             "bwd_peak_per_token_hidden": r["bwd_peak_per_token_hidden"]})
                print(json.dumps(rows[-1]), flush=True)
    import os
    result = {"what": "op-SAC block backward peak above its start vs tokens",
              "script": "bench/compile_saved.py --bwd-scaling", "torch": torch.__version__,
              "torchao": float8, "shape": {"seq": SEQ, "dim": DIM, "heads": HEADS,
                                           "kv_heads": KV_HEADS, "ffn": FFN, "dtype": "bfloat16"},
              "unit": "bytes / (batch * seq * dim)", "rows": rows}
    with open(out + ".tmp", "w") as f:
        f.write(json.dumps(result, indent=1) + "\n")
    os.replace(out + ".tmp", out)
    return 0


def float8_sac(out, torchao):
    """Eager op-level SAC with torchao float8 linears under both of torchtitan's save lists
    (9dec370's with aten.abs, e7c0cae's without), tensorwise and rowwise recipes: what the block
    keeps (the policy caches abs(input) and abs(weight) of every cast with abs in the list), its
    backward's peak, and per layer under FSDP2 (rank 0 of 8, fake process group) with bf16 and
    float8 all-gathers (the weight's cast then runs in FSDP2's pre-all-gather, outside the
    checkpointed region)."""
    import os
    rows, fsdp = [measure("op", False)], []
    for name in ("9dec370", "e7c0cae"):
        set_save_list(name)
        for recipe in ("tensorwise", "rowwise"):
            r = measure("op", False, float8=True, recipe=recipe)
            rows.append(dict(r, save_list=name))
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "tensors"}), flush=True)
        for kind in ("float8", "float8_all_gather"):
            fsdp.append(dict(measure_fsdp(kind, False), save_list=name))
            print(json.dumps(fsdp[-1]), flush=True)
        fsdp.append(dict(measure_fsdp("float8", False, recipe="rowwise"), save_list=name))
        print(json.dumps(fsdp[-1]), flush=True)
    set_save_list("9dec370")
    fsdp.append(measure_fsdp("bf16", False))
    result = {"what": "eager op-level SAC with torchao float8 linears: what a torchtitan-style "
                      "Llama-3 block keeps per torchtitan save list and recipe",
              "script": "bench/compile_saved.py --float8-sac", "torch": torch.__version__,
              "python": platform.python_version(), "torchao": torchao,
              "save_lists": {"9dec370": "mm, SDPA, reduce_scatter, abs, max (torchtitan "
                                        "bcebc0de5..88247277c, 2024-11-26..2025-02-06)",
                             "e7c0cae": "mm, SDPA, reduce_scatter, max (from 88247277c)"},
              "shape": {"batch": BATCH, "seq": SEQ, "dim": DIM, "heads": HEADS,
                        "kv_heads": KV_HEADS, "ffn": FFN, "dtype": "bfloat16"},
              "unit": "bytes per token per hidden unit: bytes / (batch * seq * dim)",
              "rows": rows, "fsdp2": fsdp}
    with open(out + ".tmp", "w") as f:
        f.write(json.dumps(result, indent=1) + "\n")
    os.replace(out + ".tmp", out)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the JSON result here")
    ap.add_argument("--float8", metavar="TORCHAO",
                    help="also measure the block with torchao float8 linears; the value names "
                         "the torchao build for the record (e.g. pytorch/ao@0afa4c1)")
    ap.add_argument("--bwd-scaling", metavar="OUT",
                    help="instead: the op-SAC block's backward peak at 1024, 2048 and 4096 tokens "
                         "(batch 2, 4, 8), eager and compiled (and float8 with --float8), to OUT")
    ap.add_argument("--float8-sac", metavar="OUT",
                    help="instead: eager op-SAC float8 blocks per torchtitan save list and "
                         "recipe, alone and under FSDP2 (needs --float8), to OUT")
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    # every block is partitioned afresh (a cache hit would skip the partitioner)
    import torch._functorch.config as aot_config
    import torch._inductor.config as inductor_config
    aot_config.enable_autograd_cache = False
    inductor_config.fx_graph_cache = False
    capture_partitioner()
    if args.float8_sac:
        return float8_sac(args.float8_sac, args.float8)
    if args.bwd_scaling:
        return bwd_scaling(args.bwd_scaling, args.float8)
    rows = [measure(ac, c) for ac in ("op", "full", "none") for c in (False, True)]
    if args.float8:
        rows += [measure(ac, c, float8=True) for ac in ("op", "full") for c in (False, True)]
    loss = [measure_loss(c) for c in (False, True)]
    fsdp = [measure_fsdp("bf16", c) for c in (False, True)]
    if args.float8:
        fsdp += [measure_fsdp(kind, True) for kind in ("float8", "float8_all_gather")]
    result = {
        "what": "bytes one torchtitan-style Llama-3 block holds for its backward, eager vs "
                "torch.compile, per activation checkpointing mode; and the cross-entropy's",
        "script": "bench/compile_saved.py",
        "torch": torch.__version__, "python": platform.python_version(),
        "device": "cpu (Inductor C++ codegen); the partitioner's choice does not depend on it",
        "shape": {"batch": BATCH, "seq": SEQ, "dim": DIM, "heads": HEADS, "kv_heads": KV_HEADS,
                  "ffn": FFN, "dtype": "bfloat16"},
        "unit": "bytes per token per hidden unit: bytes / (batch * seq * dim)",
        "method": "held: CPU allocator events under torch.profiler(profile_memory=True), net bytes "
                  "a forward leaves besides its output, plus the block input when the backward "
                  "holds it; tensors: saved_tensors_hooks (eager, no AC), the checkpoint input "
                  "and the op policy's MUST_SAVE outputs (eager SAC), CompiledFunctionBackward."
                  "saved_tensors named by the min-cut partitioner's forward graph (compiled)",
        "torchao": args.float8, "rows": rows, "loss": loss, "fsdp2": fsdp}
    if args.out:
        import os
        with open(args.out + ".tmp", "w") as f:
            f.write(json.dumps(result, indent=1) + "\n")
        os.replace(args.out + ".tmp", args.out)
    for r in rows:
        print(f"{r['ac']:5} {'compiled' if r['compiled'] else 'eager   '}"
              f"{' float8' if r['float8'] else ''} held "
              f"{r['held_per_token_hidden']:7.3f} B/(s*d)  named {r['named_bytes']}  "
              f"forward transient {r['fwd_transient_per_token_hidden']:7.3f}  backward peak "
              f"{r['bwd_peak_per_token_hidden']:7.3f}")
        for t in r["tensors"]:
            print(f"        {t['what']:12} {t['op']:44} {t['dtype']:9} {str(t['shape']):18} "
                  f"{t['per_token_hidden']}  {t['node']}")
    for r in fsdp:
        print(f"fsdp2 {r['linears']:17} {'compiled' if r['compiled'] else 'eager   '} op-SAC "
              f"held per layer {r['held_per_layer_per_token_hidden']:7.3f} B/(s*d)")
    for r in loss:
        print(f"loss {'compiled' if r['compiled'] else 'eager   '} forward keeps "
              f"{r['fwd_held_per_logit']} B/logit, forward peak {r['fwd_peak_per_logit']}, "
              f"backward peak {r['bwd_peak_per_logit']} ({r['grad_dtype']} gradient)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
