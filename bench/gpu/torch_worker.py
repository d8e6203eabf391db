#!/usr/bin/env python3
"""One PyTorch side of bench/gpu/bench.py, in its own process (its memory is freed on exit).

transformers' causal LM of --config's model_type (a config.json-style file: LlamaForCausalLM,
GptOssForCausalLM) built in bf16 directly on the device, or loaded from --model-dir (the files
air reads too: from_pretrained in bf16 onto the device), optionally
  --attn NAME              attn_implementation (the second seed's: eager)
  --lora R,ALPHA,DROPOUT,TARGETS  peft.get_peft_model with LoraConfig(r, lora_alpha,
                           lora_dropout, target_modules, bias="none", task_type="CAUSAL_LM"):
                           the frozen base in bf16, the adapters in fp32 (PEFT's
                           autocast_adapter_dtype), AdamW over the adapters only
  --autocast               the forward under torch.autocast(bf16), as Trainer's bf16=True runs it
  --compile layers|model   torch.compile each decoder layer in place (before FSDP and
                           checkpointing wrap it: torchtitan's way) or the whole (wrapped) model
  --fsdp                   FSDP1 FullyShardedDataParallel FULL_SHARD (auto-wrap on
                           the decoder layer, MixedPrecision(bf16, bf16, bf16),
                           use_orig_params=True as Accelerate sets it) over a process group of
                           one (NCCL on a GPU, gloo on the CPU; env:// from the parent's
                           MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE). FSDP1 itself switches a
                           world of one to NO_SHARD (it warns); that is the seed's run too
  --ac                     activation checkpointing: apply_activation_checkpointing with the
                           non-reentrant checkpoint_wrapper on every decoder layer
                           (LlamaDecoderLayer, GptOssDecoderLayer; after PEFT, as the seed's
                           FSDP config applies it)
  --fused-adam             torch.optim.AdamW(fused=True) instead of the default (foreach)
then --warmup + --steps optimizer steps of --accum micro-batches of --batch rows of the
pre-tokenized --rows file (labels = input_ids: transformers shifts them, so every position but
the first is a real label), each micro-batch's mean loss / accum backward, clipping at --clip
(FSDP's clip_grad_norm_ under FSDP), AdamW. Timing covers the --steps after the warm-up, between
device synchronizations. Writes --out: {"tokens_per_s", "losses", "max_allocated", ...}, or
{"error", "oom"} when it fails (exit 1). --save-model DIR only builds the model and writes it
with save_pretrained (bf16 safetensors): air's model for bench.py --model-init torch.
"""
import argparse
import json
import os
import time
import traceback


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", required=True)
    p.add_argument("--rows", help="the pre-tokenized rows (JSONL of input_ids)")
    p.add_argument("--out", required=True)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--accum", type=int, default=2)
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--fsdp", action="store_true")
    p.add_argument("--ac", action="store_true")
    p.add_argument("--compile", choices=["none", "layers", "model"], default="none")
    p.add_argument("--fused-adam", action="store_true")
    p.add_argument("--backend", choices=["nccl", "gloo"],
                   help="the process group's (--fsdp): nccl on a GPU, gloo on the CPU")
    p.add_argument("--save-model", help="only build the model and save_pretrained it here "
                   "(bf16 safetensors, bench.py --model-init torch), then exit")
    p.add_argument("--model-dir", help="load the model from these files (from_pretrained)")
    p.add_argument("--attn", help="attn_implementation (transformers' default if absent)")
    p.add_argument("--experts", help="experts_implementation of a MoE model (grouped_mm, eager; "
                   "transformers' default if absent)")
    p.add_argument("--lora", help="r,alpha,dropout,targets: PEFT LoRA over the frozen model "
                   "(targets: all-linear or module names joined by '+')")
    p.add_argument("--autocast", action="store_true", help="forward under autocast(bf16)")
    return p.parse_args()


def build_model(args, device):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    extra = {"attn_implementation": args.attn} if args.attn else {}
    if args.experts:
        extra["experts_implementation"] = args.experts
    if args.model_dir:  # the seed's from_pretrained(bf16, use_cache=False), onto the device
        model = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.bfloat16,
                                                     use_cache=False, device_map=device, **extra)
    else:
        with open(args.config) as f:
            keys = json.load(f)
        config = AutoConfig.for_model(keys.pop("model_type", "llama"), **keys)
        config.use_cache = False  # training: no KV cache
        torch.manual_seed(0)
        with torch.device(device):  # random init on the device itself (fast, no fp32 copy)
            model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, **extra)
    model.train()
    return model


def apply_lora(model, spec):
    """PEFT over the model as the second seed sets it up; returns it and a line saying so."""
    import peft
    r, alpha, dropout, targets = spec.split(",")
    targets = targets if targets == "all-linear" else targets.split("+")
    model = peft.get_peft_model(model, peft.LoraConfig(
        r=int(r), lora_alpha=float(alpha), lora_dropout=float(dropout), target_modules=targets,
        bias="none", task_type="CAUSAL_LM"))
    adapted = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules()
                      if hasattr(m, "lora_A") and hasattr(m, "base_layer")})
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return model, (f"PEFT LoRA r {r} alpha {alpha} dropout {dropout} on {'/'.join(adapted)}: "
                   f"{trainable / 1e6:.2f} M trainable parameters")


def decoder_layer_class(model):
    """The decoder layer's class (LlamaDecoderLayer, GptOssDecoderLayer): FSDP's unit and
    activation checkpointing's, found as the seed's infer_transformer_blocks_for_fsdp does."""
    for module in model.modules():
        if type(module).__name__.endswith("DecoderLayer"):
            return type(module)
    raise RuntimeError("no *DecoderLayer module in the model")


def allow_layer_recompiles():
    """Each decoder layer is its own module: leave dynamo room for one graph per layer, so no
    layer silently falls back to eager after the default limit of 8."""
    import torch._dynamo
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 256)


def wrap_model(model, args, device):
    """Compile / FSDP1 / activation checkpointing as the flags ask; returns the model to call
    and a line saying what was applied."""
    import torch
    layer_class = decoder_layer_class(model)
    applied = []
    if args.compile == "layers":
        allow_layer_recompiles()
        for layer in model.model.layers:
            layer.compile()
        applied.append("torch.compile per decoder layer")
    if args.fsdp:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp import MixedPrecision, ShardingStrategy
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        bf16 = torch.bfloat16
        model = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({layer_class}),
                     mixed_precision=MixedPrecision(param_dtype=bf16, reduce_dtype=bf16,
                                                    buffer_dtype=bf16),
                     sharding_strategy=ShardingStrategy.FULL_SHARD, device_id=device,
                     use_orig_params=True)
        applied.append(f"FSDP1 FULL_SHARD (runs as {model.sharding_strategy.name} at world "
                       f"size {torch.distributed.get_world_size()})")
    if args.ac:
        from functools import partial
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
            CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper)
        apply_activation_checkpointing(
            model, checkpoint_wrapper_fn=partial(checkpoint_wrapper,
                                                 checkpoint_impl=CheckpointImpl.NO_REENTRANT),
            check_fn=lambda m: isinstance(m, layer_class))
        applied.append("activation checkpointing (non-reentrant)")
    if args.compile == "model":
        allow_layer_recompiles()
        model.compile()
        applied.append("torch.compile of the whole model")
    return model, ", ".join(applied) or "eager, no wrapping"


def micro_batches(args, device):
    """The rows file as [warmup + steps][accum] tensors of [batch, seq] ids (wrapping around)."""
    import torch
    with open(args.rows) as f:
        rows = [json.loads(line)["input_ids"][:args.seq] for line in f]
    steps, k = [], 0
    for _ in range(args.warmup + args.steps):
        step = []
        for _ in range(args.accum):
            ids = [rows[(k + i) % len(rows)] for i in range(args.batch)]
            k += args.batch
            step.append(torch.tensor(ids, dtype=torch.long, device=device))
        steps.append(step)
    return steps


def sync(device):
    import torch
    if device.type == "cuda":
        torch.cuda.synchronize()


def train(model, args, device):
    import torch
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    trainable = [p for p in model.parameters() if p.requires_grad]  # LoRA: the adapters
    opt = torch.optim.AdamW(trainable, lr=args.lr, weight_decay=args.weight_decay,
                            **({"fused": True} if args.fused_adam else {}))
    batches = micro_batches(args, device)
    losses, step_s, start = [], [], None
    for i, step in enumerate(batches):
        if i == args.warmup:
            sync(device)
            start = time.perf_counter()
        t0 = time.perf_counter()
        total = 0.0
        for ids in step:
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.autocast):
                loss = model(input_ids=ids, labels=ids, use_cache=False).loss / args.accum
            loss.backward()
            total += loss.detach()
        if isinstance(model, FSDP):
            model.clip_grad_norm_(args.clip)
        else:
            torch.nn.utils.clip_grad_norm_(trainable, args.clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(total))  # one read per step, as air's trainer does
        step_s.append(time.perf_counter() - t0)
    sync(device)
    seconds = time.perf_counter() - start
    tokens = args.steps * args.accum * args.batch * args.seq
    return {"tokens_per_s": tokens / seconds, "seconds": seconds, "tokens": tokens,
            "losses": losses, "step_s": step_s, "warmup_s": sum(step_s[:args.warmup])}


def init_process_group(device, backend=None):
    import torch.distributed as dist
    backend = backend or ("nccl" if device.type == "cuda" else "gloo")
    dist.init_process_group(backend, init_method="env://")
    return backend


def main():
    args = parse_args()
    result = {"error": None, "oom": False}
    try:
        import torch
        device = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")
        if device.type == "cuda":
            torch.cuda.set_device(device)
            result["device_name"] = torch.cuda.get_device_name(device)
        result["torch"] = torch.__version__
        if args.fsdp:
            result["backend"] = init_process_group(device, args.backend)
        model = build_model(args, device)
        result["parameters"] = sum(p.numel() for p in model.parameters())
        if args.save_model:
            # 5 GB shards (transformers 5 writes one 50 GB shard by default: its bytes all in
            # host memory at once; shards stream, and air reads the index as for released models)
            model.save_pretrained(args.save_model, safe_serialization=True, max_shard_size="5GB")
            with open(args.out, "w") as f:
                json.dump(result, f)
            os._exit(0)
        result["attention"] = model.config._attn_implementation
        result["experts"] = getattr(model.config, "_experts_implementation", None)
        lora_line = None
        if args.lora:
            model, lora_line = apply_lora(model, args.lora)
        model, result["applied"] = wrap_model(model, args, device)
        if lora_line:
            result["applied"] = f"{lora_line}, {result['applied']}"
        if args.autocast:
            result["applied"] += ", autocast bf16"
        result.update(train(model, args, device))
        if device.type == "cuda":
            result["max_allocated"] = torch.cuda.max_memory_allocated(device)
            result["max_reserved"] = torch.cuda.max_memory_reserved(device)
    except BaseException:  # noqa: BLE001 (an OOM, a compile failure: reported, not raised)
        text = traceback.format_exc()
        result["error"] = text[-4000:]
        result["oom"] = "out of memory" in text.lower() or "OutOfMemoryError" in text
    with open(args.out, "w") as f:
        json.dump(result, f)
    if args.fsdp and not result["error"]:  # after a failure the group may not answer
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()
    os._exit(1 if result["error"] else 0)  # skip interpreter teardown (compile workers, NCCL)


if __name__ == "__main__":
    main()
