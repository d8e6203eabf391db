#!/usr/bin/env python3
"""One rank of the PyTorch FSDP2 side of bench/fsdp/vs_torch_fsdp2.py (run under torchrun).

It trains transformers' LlamaForCausalLM, loaded from the saved random init, with
torch.distributed.fsdp.fully_shard on every decoder layer and then on the root (torchtitan's
apply_fsdp; FULL_SHARD, reshard after forward), over a gloo group on the CPU, and replays the
micro-batches `air train --dump-batches PREFIX` wrote for this rank (PREFIX.rank{RANK}), so both
sides see the same rows on the same rank in the same order. The step is air's: each
micro-batch's summed cross-entropy (HF's shift: position t predicts label t+1, -100 ignored) over
the step's loss tokens counted over all ranks, times the world size because FSDP2 averages the
reduce-scattered gradients over ranks (the sum over ranks of the mean over the global tokens);
global-norm clipping at --max-grad-norm; AdamW (betas 0.9/0.999, eps 1e-8) with the weight decay
on tensors of 2+ dims only, as air applies it. Timing starts after --warmup steps, between
barriers. Rank 0 writes {"losses": [...], "tokens_per_s": x, "tokens": n} to --out.
Single-threaded script; torch.set_num_threads(--threads).
"""
import argparse
import json
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from transformers import LlamaForCausalLM


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--batches", required=True, help="the --dump-batches PREFIX")
    parser.add_argument("--out", required=True)
    parser.add_argument("--warmup", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--max-grad-norm", type=float, default=1.0)
    parser.add_argument("--bf16", action="store_true",
                        help="MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=bf16)")
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = LlamaForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    # FSDP2's mixed precision: bf16 parameters gathered and computed with, bf16 reduce-scatter,
    # fp32 sharded masters and optimizer state (air's bf16: true).
    policy = {"mp_policy": MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                                                reduce_dtype=torch.bfloat16)} if args.bf16 else {}
    for layer in model.model.layers:
        fully_shard(layer, **policy)
    fully_shard(model, **policy)
    model.train()
    named = list(model.named_parameters())
    opt = torch.optim.AdamW(
        [{"params": [p for _, p in named if p.dim() >= 2], "weight_decay": args.weight_decay},
         {"params": [p for _, p in named if p.dim() < 2], "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.999), eps=1e-8)

    steps = {}
    with open(f"{args.batches}.rank{rank}") as f:
        for line in f:
            mb = json.loads(line)
            steps.setdefault(mb["step"], []).append(mb)
    losses, tokens, start = [], 0, None
    for index, step in enumerate(sorted(steps)):
        if index == args.warmup:
            dist.barrier()
            start, tokens = time.perf_counter(), 0
        # One document per row (no packing): the replay has no cross-document mask to apply.
        if any(max(max(row) for row in mb["segment_ids"]) > 1 for mb in steps[step]):
            raise SystemExit(f"step {step}: packed rows (several segments) are not replayed")
        micro = [{k: torch.tensor(mb[k]) for k in ("input_ids", "labels", "position_ids")}
                 for mb in steps[step]]
        counts = torch.tensor([float(sum(int((mb["labels"][:, 1:] != -100).sum())
                                         for mb in micro)),
                               float(sum(mb["input_ids"].numel() for mb in micro))],
                              dtype=torch.float64)
        dist.all_reduce(counts)
        global_loss_tokens = counts[0].item()
        loss_sum = 0.0
        for mb in micro:
            logits = model(input_ids=mb["input_ids"], position_ids=mb["position_ids"]).logits
            # In fp32 as transformers' loss computes it (logits.float()): a bf16 sum over the
            # micro-batch's tokens would keep ~3 significant digits of the loss.
            ce = F.cross_entropy(logits[:, :-1].float().flatten(0, 1),
                                 mb["labels"][:, 1:].flatten(),
                                 ignore_index=-100, reduction="sum")
            (ce * (world / global_loss_tokens)).backward()
            loss_sum += ce.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
        opt.step()
        opt.zero_grad(set_to_none=True)
        total = torch.tensor([loss_sum], dtype=torch.float64)
        dist.all_reduce(total)
        losses.append(total.item() / global_loss_tokens)
        tokens += int(counts[1].item())
    dist.barrier()
    seconds = time.perf_counter() - start
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump({"losses": losses, "tokens_per_s": tokens / seconds, "tokens": tokens}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
