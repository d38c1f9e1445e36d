"""The common IR: where every setting came from, and the frozen Scenario the memory model reads.

Adapters never build a Scenario themselves. Each returns a `Partial`: a flat mapping from scenario
keys (the vocabulary of DESIGN.md, listed in `memlint.keys`) to `Setting`s, i.e. a value plus its
`Provenance`. `memlint.scenario` merges partials (later sources win, conflicts are diagnostics),
converts and validates the values, and builds the typed, frozen `Scenario` below.

Model architecture travels in Hugging Face `config.json` vocabulary: an adapter that knows the
architecture (config.json, a Megatron script, a torchtitan flavor) emits `model.<hf_key>` settings,
e.g. `model.hidden_size`. Nested HF keys use dots: `model.vision_config.hidden_size`.
"""
from __future__ import annotations

from types import MappingProxyType

from memlint.records import field, record

TYPE_CHECKING = False   # start-up: typing is for the type checker only (memlint/records.py)
if TYPE_CHECKING:
    from typing import Any, Mapping, Optional


@record(frozen=True, slots=True)
class Provenance:
    """Where a value was set: file, 1-based line and column, and the key as the source spells it."""

    file: Optional[str] = None
    line: Optional[int] = None
    column: Optional[int] = None
    key: Optional[str] = None

    def describe(self) -> str:
        parts = [self.file or "<command line>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        text = ":".join(parts)
        return f"{text} ({self.key})" if self.key else text


COMMAND_LINE = Provenance(file=None, key=None)
DEFAULT = Provenance(file=None, key="<default>")
# `Partial.extra` key prefix of a file a config refers to that could not be read (not found): the
# settings it holds (a ZeRO stage, an offload) are missing from the run, so a memory verdict rests
# on it
UNREAD_REFERENCE = "unread_reference:"
# `Partial.extra` key any adapter sets when the file is no training run memlint estimates (a
# text-generation or evaluation launch, an inference test case): its value says why. The run
# gets no memory verdict, and the summary line names the reason.
NO_ESTIMATE = "no_estimate"
# ... and, beside it, which of memlint/verdicts.py REASONS that is when it is not "not a training
# run" (a training run memlint does not model: an RLHF with reference models, a tuner type)
NO_ESTIMATE_REASON = "no_estimate.reason"
# `Partial.extra` key prefix of a setting whose effect on memory depends on the framework's
# version (the file cannot say which version it was written for): its value says how. The RL
# rules (rules/rl.py) name it, and an out-of-memory verdict that rests on it is a warning.
VERSION_DEPENDENT = "rl.version_dependent:"


@record(frozen=True)
class Setting:
    """One scenario value as a source gave it (not yet converted) and where it came from."""

    value: Any
    prov: Provenance


@record
class Partial:
    """What one adapter read from one file: settings by scenario key, plus its diagnostics.

    `extra` holds facts that are not scenario keys but that rules of that format need (for example
    DeepSpeed's bucket sizes or the raw batch triple); keys are namespaced by the adapter
    (`deepspeed.reduce_bucket_size`) and values are `Setting`s too.
    """

    source: str
    fmt: str
    settings: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    diagnostics: list = field(default_factory=list)
    # Files this one refers to (a deepspeed_config_file, an HF config next to a script).
    references: list = field(default_factory=list)
    # Line numbers with `# memlint: disable=...` comments: line -> set of codes/names ("all").
    suppressions: dict = field(default_factory=dict)
    # Where this file defines the run (a launch script's launch command), if not at its first line:
    # verdicts about the run as a whole are reported there.
    anchor: Optional[Provenance] = None

    def set(self, key: str, value: Any, prov: Provenance) -> None:
        self.settings[key] = Setting(value, prov)

    def set_extra(self, key: str, value: Any, prov: Provenance) -> None:
        self.extra[key] = Setting(value, prov)


def frozen_mapping(data: Mapping) -> Mapping:
    return MappingProxyType(dict(data))


# ---------------------------------------------------------------------------------------------
# The typed scenario. Values are plain Python; `Scenario.where(key)` gives a value's Provenance.


@record(frozen=True)
class ModelSpec:
    """The model: its HF-style config (merged from every source) and optional count overrides."""

    config: Mapping[str, Any]
    name: Optional[str] = None          # path or preset name it came from
    total_params: Optional[int] = None  # override when only totals are known (seed articles)
    expert_params: Optional[int] = None
    # the framework pads vocab_size to a multiple of this × tp (memlint/facts/vocab.py)
    vocab_pad_multiple: Optional[int] = None


@record(frozen=True)
class Training:
    framework: str = "megatron"
    micro_batch: int = 1
    global_batch: Optional[int] = None
    grad_accum: Optional[int] = None
    seq_len: int = 4096
    precision: str = "bf16"
    # None: derived from precision + framework by memlint.memory.states.dtypes()
    param_dtype: Optional[str] = None
    grad_dtype: Optional[str] = None
    master_weights: Optional[bool] = None
    optimizer_state_dtype: Optional[str] = None  # also int8 / int4 (block-quantized moments)
    optimizer_state_block: Optional[int] = None  # elements per fp32 scale (None: the library's)
    optimizer_paged: bool = False  # bitsandbytes paged optimizer states (unified memory)
    fp8_params: bool = False  # TE FP8 parameters (fp8_model_init, Megatron --fp8-param-gather)
    optimizer: str = "adamw"
    optimizer_impl: Optional[str] = None
    compile: bool = False     # torch.compile of the model (memory/compile.py)
    compile_loss: Optional[bool] = None  # the loss compiled too (None: with compile, as
    #                                      torchtitan's compile.components and HF torch_compile do)
    attention: str = "flash"
    recompute: str = "none"
    recompute_every: int = 1
    train_base: bool = True   # False: the base model is frozen (no grads / optimizer states)
    trainable_layers: Optional[str] = None  # keys.layer_spec: the layers a partial fine-tune trains
    frozen_dtype: Optional[str] = None      # frozen weights' dtype when not the param dtype
    lora_rank: int = 0
    lora_targets: str = "qkvo"
    lora_dropout: float = 0.0
    lora_modules_to_save: str = ""  # keys.module_names: "embedding,output", other names as written
    base_quant: str = "none"
    images_per_sample: int = 0
    tokens_per_image: int = 0
    # start-up and checkpoints (memory/host.py, memory/checkpoint.py); None: the framework's default
    model_init: Optional[str] = None
    train_steps: Optional[int] = None
    checkpoint_interval: Optional[int] = None
    checkpoint_keep: Optional[int] = None
    save_optimizer: bool = True


@record(frozen=True)
class Parallelism:
    world_size: Optional[int] = None
    tp: int = 1
    pp: int = 1
    vpp: int = 1
    dp: Optional[int] = None  # None: derived from world_size (memlint.memory.topology)
    cp: int = 1
    ep: int = 1
    etp: Optional[int] = None
    sp: bool = False
    zero: int = 0
    fsdp: str = "none"
    dp_shard: Optional[int] = None
    dp_replicate: int = 1
    reshard_after_forward: bool = True
    offload_optimizer: str = "none"
    offload_params: str = "none"
    offload_experts: str = "none"     # cpu: routed experts on the host (KTransformers' AMX MoE)
    offload_activations: bool = False
    offload_activations_layers: Optional[int] = None  # None: every layer of a stage
    # Uneven pipeline splits (Megatron decoder-first/last-pipeline-num-layers).
    first_stage_layers: Optional[int] = None
    last_stage_layers: Optional[int] = None


@record(frozen=True)
class Hardware:
    gpu: str = "H100-80GB"
    gpu_memory: int = 80 * 1024**3
    gpus_per_node: int = 8
    device: str = "cuda"
    # the node around the GPUs (memory/host.py); None: not known, no host verdict
    node: Optional[str] = None
    host_memory: Optional[int] = None
    nvme_capacity: Optional[int] = None
    disk: Optional[int] = None


@record(frozen=True)
class RL:
    """RL post-training and preference training (issue 28): the models a run holds besides the
    policy, where each sits, how many tokens each pass sees, and what moves to the host between
    phases. Defaults describe plain training (no second model, nothing moved)."""

    algorithm: Optional[str] = None   # grpo, ppo, rloo, dpo, kto, orpo, simpo, reward, ...
    framework: Optional[str] = None   # verl, openrlhf, trl, ... (memory/rl/conventions.py)
    placement: str = "hybrid"         # hybrid (one process per GPU) | colocated | separate
    # the reference policy: none, a frozen copy ("model"), the base with the adapter disabled
    # ("adapter", PEFT), or log-probabilities computed before training ("precomputed")
    reference: str = "none"
    reference_model: Optional[str] = None   # a different model than the policy (name or path)
    reference_offload: bool = False         # parameters on the host, gathered per unit
    reference_dtype: Optional[str] = None   # its parameters' dtype (None: the policy's)
    reference_micro_batch: Optional[int] = None
    critic: bool = False                    # a value model trained beside the policy (PPO/GAE)
    critic_model: Optional[str] = None
    critic_micro_batch: Optional[int] = None
    critic_forward_micro_batch: Optional[int] = None
    critic_recompute: Optional[bool] = None
    critic_param_offload: bool = False
    critic_optimizer_offload: bool = False
    reward_model: Optional[str] = None      # a learned reward model scored after rollout
    reward_micro_batch: Optional[int] = None
    reward_offload: bool = False
    # between-phase offload of the policy (verl param_offload / optimizer_offload,
    # OpenRLHF --deepspeed_enable_sleep): on the GPU for its own passes, on the host otherwise
    actor_param_offload: bool = False
    actor_optimizer_offload: bool = False
    # GPUs per role when roles do not share GPUs (placement "separate"); None: every GPU
    actor_gpus: Optional[int] = None
    critic_gpus: Optional[int] = None
    reference_gpus: Optional[int] = None
    reward_gpus: Optional[int] = None
    # tokens: prompts and responses of a rollout, samples per prompt, prompts per step
    prompt_len: Optional[int] = None
    response_len: Optional[int] = None
    samples_per_prompt: int = 1
    prompts_per_step: Optional[int] = None
    logprob_micro_batch: Optional[int] = None   # sequences per GPU in a log-prob pass
    logprob_tokens: Optional[int] = None        # dynamic batching: tokens per GPU per pass
    update_tokens: Optional[int] = None         # dynamic batching: tokens per GPU per update
    update_sequences: Optional[int] = None      # sequences per GPU in one optimizer step
    entropy: bool = False                       # entropy computed from the logits
    entropy_chunking: bool = False              # verl entropy_from_logits_with_chunking
    padding_free: bool = False                  # micro-batches hold only the real tokens
    paired: bool = False                        # chosen + rejected in one forward (DPO family)
    sync_bucket: Optional[int] = None           # bytes of one weight-sync bucket


@record(frozen=True)
class Engine:
    """An inference engine (vLLM, SGLang) as a rollout worker or a server (issue 28)."""

    name: str = "none"                  # none | vllm | sglang | hf | trtllm
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    instances: Optional[int] = None     # engines in the run (OpenRLHF --vllm_num_engines)
    gpus: Optional[int] = None          # GPUs the engines own when they do not share the trainer's
    gpu_memory_utilization: Optional[float] = None  # None: the engine's default
    max_num_batched_tokens: Optional[int] = None
    max_num_seqs: Optional[int] = None
    max_model_len: Optional[int] = None
    enforce_eager: bool = False
    kv_cache_dtype: Optional[str] = None  # None / auto: the model dtype
    quantization: Optional[str] = None
    dtype: Optional[str] = None
    sleep_level: int = 0      # 0: stays awake; 1: weights to host RAM, KV freed; 2: both freed
    version: Optional[str] = None


@record(frozen=True)
class Assumptions:
    """A profile name plus every named assumption of it (overridable one by one)."""

    profile: str = "precise"
    values: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)


@record(frozen=True)
class Scenario:
    model: Optional[ModelSpec]
    training: Training
    parallelism: Parallelism
    hardware: Hardware
    assumptions: Assumptions
    # scenario key -> Provenance of the value in force (absent: the default applied)
    provenance: Mapping[str, Provenance] = field(default_factory=dict)
    sources: tuple = ()
    # format-specific facts adapters recorded (see Partial.extra), merged
    extra: Mapping[str, Setting] = field(default_factory=dict)
    rl: RL = field(default_factory=RL)
    engine: Engine = field(default_factory=Engine)
    # the declared framework settings a framework's conventions rest on (memlint.keys
    # CONVENTION_KEYS), converted; memory/conventions.py builds the Conventions record from them
    convention_keys: Mapping[str, Any] = field(default_factory=dict)

    def where(self, key: str) -> Optional[Provenance]:
        """The Provenance of the value of `key`, or None when the default applied."""
        return self.provenance.get(key)

    def is_set(self, key: str) -> bool:
        return key in self.provenance
