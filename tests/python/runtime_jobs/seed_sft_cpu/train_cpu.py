#!/usr/bin/env python3
"""The seed's examples/multinode_llm_sft/train.py switched to CPU: gloo instead of NCCL, DDP
instead of FSDP, a tiny random-init Llama instead of Llama-3.1-8B from the Hub, and a
synthetic instruction set instead of alpaca (no network). Everything else as the seed does it:
the same imports (mlflow, torch, yaml, transformers: from the base environment and the
dependencies, none installed by the test), hyperparameters from HYPERPARAMETERS_PATH, and
rank 0 saving the checkpoint with save_pretrained to `output_dir`, a /Volumes path."""

import os

import mlflow
import torch
import torch.distributed as dist
import yaml
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import LlamaConfig, LlamaForCausalLM


def load_params() -> dict:
    path = os.environ.get("HYPERPARAMETERS_PATH")
    if path and os.path.exists(path):
        with open(path) as f:
            return yaml.safe_load(f) or {}
    return {}


def main():
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    dist.init_process_group(backend="gloo")
    p = load_params()
    max_steps = int(p.get("max_steps", 100))
    max_seq_len = int(p.get("max_seq_len", 1024))
    batch_size = int(p.get("per_device_batch_size", 4))
    output_dir = p.get("output_dir", "/tmp/llama-sft")
    if rank == 0:
        print(f"World size={world_size} | mlflow {mlflow.__version__} | torch {torch.__version__}",
              flush=True)

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=max_seq_len)
    model = DDP(LlamaForCausalLM(config))
    optimizer = torch.optim.AdamW(model.parameters(), lr=float(p.get("learning_rate", 2e-5)))
    generator = torch.Generator().manual_seed(rank)
    for step in range(1, max_steps + 1):
        input_ids = torch.randint(0, 64, (batch_size, min(max_seq_len, 16)), generator=generator)
        out = model(input_ids=input_ids, labels=input_ids)
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if rank == 0:
            print(f"step={step}/{max_steps} loss={out.loss.item():.4f}", flush=True)

    if rank == 0:
        os.makedirs(output_dir, exist_ok=True)
        model.module.save_pretrained(output_dir)
        print(f"Saved checkpoint to {output_dir}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
