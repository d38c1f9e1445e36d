"""Live tensor bytes of an HF Trainer + PEFT LoRA step against a plain training loop, on the CPU.

Question it answers (issue 25, the Qwen HF + PEFT rows): does the HF Trainer (accelerate's autocast
wrapper, gradient accumulation, clipping, AdamW) or PEFT keep a tensor on top of what a plain loop
over the same model keeps? Both run the same Qwen2-style model (bf16 frozen base, LoRA on every
linear, reentrant checkpointing, bf16 autocast, 2 micro-batches, 2 steps); a TorchDispatchMode
counts every storage created inside the run (the weights, created before, are not counted) and
records the peak of the live ones, with what was alive at that peak.

Needs torch, transformers, peft and accelerate (none is a memlint dependency):

    python bench/hf_trainer_peak.py [--hidden 512] [--vocab 32768] [--seq 128] [--layers 2]

On a GPU (`--device cuda`) it prints, per run, what each kind of log reads: the caching
allocator's peak allocated and reserved bytes and the device memory in use (cudaMemGetInfo, what
nvidia-smi shows), with the CUDA context measured before the model exists. `--qwen-loss` computes
the loss as Qwen v1's remote code does (`lm_logits[..., :-1, :].contiguous()`, then
`CrossEntropyLoss`, no upcast of its own). The Qwen rows of gpu-published (Qwen-7B shapes: hidden
4096, ffn 11008, 32 layers, vocab 151936; LoRA r 64, 2 of 8 accumulated micro-batches here) are:

    python bench/hf_trainer_peak.py --device cuda --qwen-loss --hidden 4096 --ffn 11008 \
        --layers 32 --heads 32 --vocab 151936 --seq 256 --rank 64 --only trainer

Measured (torch 2.13.0+cpu, transformers 5.24.0, peft 0.21.2, accelerate 1.16.0; hidden 512,
vocab 32768, seq 128, 2 layers): loop 52,597,368 B, Trainer 52,603,532 B; at the peak the loss's
log-probabilities, their gradient and the logits' gradient (3 x 4 B x 128 x 32768) and small
tensors only.
"""
from __future__ import annotations

import argparse
import weakref


def _tracker():
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Live(TorchDispatchMode):
        """Storages created inside the mode: live bytes, their peak and what was alive then."""

        def __init__(self, ignore):
            super().__init__()
            self._keep = [t.untyped_storage() for t in ignore]
            self.ignored = {id(s) for s in self._keep}
            self.alive, self.live, self.peak, self.at_peak = {}, 0, 0, {}

        def _free(self, key, nbytes):
            self.alive.pop(key, None)
            self.live -= nbytes

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in tree_flatten(out)[0]:
                if not isinstance(t, torch.Tensor):
                    continue
                storage = t.untyped_storage()
                key, nbytes = id(storage), storage.nbytes()
                if nbytes and key not in self.alive and key not in self.ignored:
                    self.alive[key] = (nbytes, str(func), tuple(t.shape), str(t.dtype))
                    self.live += nbytes
                    weakref.finalize(storage, self._free, key, nbytes)
                    if self.live > self.peak:
                        self.peak, self.at_peak = self.live, dict(self.alive)
            return out

    return Live


def qwen_loss(outputs, labels, num_items_in_batch=None):
    """Qwen v1's remote-code loss (modeling_qwen.py QWenLMHeadModel.forward): the shifted logits
    copied contiguous in their own dtype, then CrossEntropyLoss."""
    from torch.nn import CrossEntropyLoss

    logits = outputs["logits"]
    shift_logits = logits[..., :-1, :].contiguous()
    shift_labels = labels[..., 1:].contiguous().to(logits.device)
    return CrossEntropyLoss()(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1))


def run(mode: str, a) -> tuple:
    import torch
    from peft import LoraConfig, get_peft_model
    from torch.utils.data import Dataset
    from transformers import Qwen2Config, Qwen2ForCausalLM, Trainer, TrainingArguments

    hidden, vocab, seq, cuda = a.hidden, a.vocab, a.seq, a.device == "cuda"
    torch.manual_seed(0)
    context = 0
    if cuda:
        torch.cuda.init()
        torch.empty(1, device="cuda")
        free, total = torch.cuda.mem_get_info()
        context = total - free - torch.cuda.memory_reserved()
        torch.cuda.reset_peak_memory_stats()
    config = Qwen2Config(hidden_size=hidden, intermediate_size=a.ffn or 2 * hidden,
                         num_hidden_layers=a.layers, num_attention_heads=a.heads,
                         num_key_value_heads=a.heads, vocab_size=vocab,
                         tie_word_embeddings=False, max_position_embeddings=seq, use_cache=False)
    with torch.device("cuda" if cuda else "cpu"):
        model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    model = get_peft_model(model, LoraConfig(r=a.rank, lora_alpha=16, lora_dropout=0.05,
                                             target_modules="all-linear", task_type="CAUSAL_LM"))
    model.enable_input_require_grads()

    class Tokens(Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            ids = torch.randint(0, vocab, (seq,))
            return {"input_ids": ids, "labels": ids.clone(),
                    "attention_mask": torch.ones(seq, dtype=torch.long)}

    live = _tracker()(list(model.parameters()) + list(model.buffers()))
    if mode == "trainer":
        args = TrainingArguments(output_dir="hf_trainer_peak.out", per_device_train_batch_size=1,
                                 gradient_accumulation_steps=2, max_steps=2, bf16=True,
                                 use_cpu=not cuda, gradient_checkpointing=True,
                                 gradient_checkpointing_kwargs={"use_reentrant": True},
                                 report_to=[], save_strategy="no", optim="adamw_torch",
                                 max_grad_norm=1.0, dataloader_num_workers=0)
        trainer = Trainer(model=model, args=args, train_dataset=Tokens(),
                          compute_loss_func=qwen_loss if a.qwen_loss else None)
        with live:
            trainer.train()
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
        model.train()
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(trainable, lr=1e-4)
        data = Tokens()
        with live:
            for _step in range(2):
                for _micro in range(2):
                    batch = {k: v[None].to(model.device) for k, v in data[0].items()}
                    with torch.autocast(a.device, dtype=torch.bfloat16):
                        if a.qwen_loss:
                            labels = batch.pop("labels")
                            loss = qwen_loss(model(**batch), labels) / 2
                        else:
                            loss = model(**batch).loss / 2
                    loss.backward()
                torch.nn.utils.clip_grad_norm_(trainable, 1.0)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
    stats = {}
    if cuda:
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        stats = {"context": context, "max_allocated": torch.cuda.max_memory_allocated(),
                 "max_reserved": torch.cuda.max_memory_reserved(), "device_used": total - free}
    return live.peak, live.at_peak, stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--vocab", type=int, default=32768)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--ffn", type=int, default=0, help="MLP width (default 2 x hidden)")
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--qwen-loss", action="store_true")
    parser.add_argument("--only", choices=("loop", "trainer"))
    a = parser.parse_args()
    for mode in (a.only,) if a.only else ("loop", "trainer"):
        peak, at_peak, stats = run(mode, a)
        print(f"{mode:<8} peak live bytes {peak:,}"
              + "".join(f"; {k} {v:,}" for k, v in stats.items()))
        for nbytes, func, shape, dtype in sorted(at_peak.values(), reverse=True)[:4]:
            print(f"    {nbytes:>12,}  {func} {shape} {dtype}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
