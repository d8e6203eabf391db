"""Helpers of the parity tests against transformers: the batch they share (two rows of SEQ
tokens, row 1 right-padded, a masked prompt), air_engine_dump's batch file and run, and
transformers' own forward/backward on the same batch."""
import json
import subprocess

import torch
from safetensors.torch import load_file

SEQ = 136  # longer than one 64-query block of the fast attention
PAD = 5  # right padding of row 1


def padded_batch(vocab: int, seed: int = 7):
    """Two rows of SEQ tokens; row 1 right-padded by PAD; a masked prompt in row 0."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (2, SEQ), generator=g)
    mask = torch.ones(2, SEQ, dtype=torch.long)
    mask[1, SEQ - PAD:] = 0
    ids[1, SEQ - PAD:] = 0
    labels = ids.clone()
    labels[mask == 0] = -100
    labels[0, :4] = -100  # a "prompt" without loss
    segments = mask.clone()  # 1 for real tokens, 0 for padding
    positions = torch.arange(SEQ).repeat(2, 1)
    return ids, mask, labels, positions, segments


def write_batch(path, ids, labels, positions, segments):
    path.write_text(json.dumps({"input_ids": ids.tolist(), "labels": labels.tolist(),
                                "position_ids": positions.tolist(),
                                "segment_ids": segments.tolist()}))


def run_dump(dump_bin, model_dir, batch_path, out_path, *extra):
    proc = subprocess.run([dump_bin, "--model", str(model_dir), "--batch", str(batch_path),
                           "--out", str(out_path), *map(str, extra)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"air_engine_dump failed:\n{proc.stderr}"
    return load_file(str(out_path))


def hf_forward_backward(model, ids, mask, labels):
    model.zero_grad(set_to_none=True)
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    out.loss.backward()
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters()}
    return out.logits.detach(), out.loss.item(), grads


