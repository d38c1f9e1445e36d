"""The SchemaStore catalog entries for memlint's schemas (SchemaStore's src/api/json/catalog.json
takes one object per schema: name, description, fileMatch, url), ready to submit.

fileMatch patterns are matched against a file's path by editors (VS Code, the YAML/TOML
language servers); they name the files these formats are found under in public repositories
(fixtures/real-world: DeepSpeedExamples, LLaMA-Factory, axolotl, accelerate, transformers,
Megatron-DeepSpeed) and no file of another common format.
"""
from __future__ import annotations

SCHEMASTORE = "https://json.schemastore.org"

DEEPSPEED_FILES = ["ds_config*.json", "*.ds-config.json", "ds_z[0-3]_*.json", "ds_zero*.json",
                   "*deepspeed*.json", "zero[0-3]*.json", "zero_stage[0-3]*.json",
                   "**/deepspeed_configs/*.json"]
MEMLINT_FILES = ["memlint.toml", "*.memlint.toml"]


def catalog() -> dict:
    return {"schemas": [
        {"name": "DeepSpeed config",
         "description": "DeepSpeed training configuration (ZeRO, mixed precision, offload, "
                        "batch sizes)",
         "fileMatch": DEEPSPEED_FILES, "url": f"{SCHEMASTORE}/deepspeed.json"},
        {"name": "memlint",
         "description": "memlint run description: model, parallel layout and the run's files "
                        "for LLM training memory checks",
         "fileMatch": MEMLINT_FILES, "url": f"{SCHEMASTORE}/memlint.json"},
        {"name": "memlint settings ([tool.memlint])",
         "description": "memlint's [tool.memlint] table of pyproject.toml",
         "fileMatch": [], "url": f"{SCHEMASTORE}/partial-memlint.json"},
    ]}
