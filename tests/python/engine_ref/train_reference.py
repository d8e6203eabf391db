"""PyTorch's side of the training parity tests: the optimizer steps `air train` takes, run by
transformers and torch on the micro-batches air dumped (`air train --dump-batches`).

torch.optim.AdamW (foreach=False) with weight decay on the parameters `decays` picks,
transformers' get_cosine_schedule_with_warmup, torch.nn.utils.clip_grad_norm_, and air's loss
normalization: each micro-batch's summed token loss divided by the loss tokens of the whole
accumulated step (transformers' num_items_in_batch rule). Packed rows go through a
block-diagonal causal mask (packed_mask) with per-document positions; unpacked rows through
transformers' own masks (attention_mask = tokens with a segment), so that models with sliding
windows build theirs.
"""
import torch
import transformers


def packed_mask(segment_ids):
    """The additive (B, 1, T, T) mask of air's attention rule: causal, and only within the same
    segment (document) of a row. Padding (segment 0) sees only itself, which keeps its softmax
    finite; its outputs never reach the loss."""
    seg = torch.tensor(segment_ids)
    t = seg.shape[1]
    causal = torch.tril(torch.ones(t, t, dtype=torch.bool))
    same = seg[:, :, None] == seg[:, None, :]
    allowed = causal[None] & same & (seg[:, :, None] != 0)
    allowed |= torch.eye(t, dtype=torch.bool)[None]
    mask = torch.zeros(allowed.shape, dtype=torch.float32)
    mask[~allowed] = torch.finfo(torch.float32).min
    return mask[:, None]


def train_steps(model, batches_by_step, *, steps, accum, lr, warmup, weight_decay,
                max_grad_norm, decays=lambda name, p: p.dim() >= 2, packed=True, fused=False):
    """Runs `steps` optimizer steps of `model` (fp32, train mode; or bf16 parameters with
    fused=True: torch's fused AdamW, each element updated in fp32 and rounded once, the seed's
    torch_dtype bfloat16 recipe) on air's micro-batches (step -> list of dumped batches); returns
    the state dict after each step, each step's loss and its gradient norm before clipping."""
    model.train()
    named = list(model.named_parameters())
    decay = [p for n, p in named if decays(n, p)]
    no_decay = [p for n, p in named if not decays(n, p)]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lr, betas=(0.9, 0.999), eps=1e-8, **({"fused": True} if fused else {"foreach": False}))
    scheduler = transformers.get_cosine_schedule_with_warmup(optimizer, warmup, steps)
    vocab = model.config.vocab_size
    states, losses, norms = [], [], []
    for step in range(1, steps + 1):
        micro = batches_by_step[step]
        assert len(micro) == accum
        n_items = sum(int((torch.tensor(b["labels"])[:, 1:] != -100).sum()) for b in micro)
        total = 0.0
        for b in micro:
            ids = torch.tensor(b["input_ids"])
            labels = torch.tensor(b["labels"])
            pos = torch.tensor(b["position_ids"])
            if packed:
                mask = packed_mask(b["segment_ids"])
            else:
                mask = (torch.tensor(b["segment_ids"]) != 0).long()
            logits = model(input_ids=ids, position_ids=pos, attention_mask=mask).logits
            token_loss = torch.nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, vocab).float(), labels[:, 1:].reshape(-1),
                ignore_index=-100, reduction="sum")
            (token_loss / n_items).backward()
            total += float(token_loss.detach())
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)))
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        losses.append(total / n_items)
        states.append({k: v.detach().clone() for k, v in model.state_dict().items()})
    return states, losses, norms
