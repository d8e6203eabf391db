"""The GPT-OSS fixtures under tests/data/gpt_oss/ are what transformers produces today.

air's gtests compare air's MXFP4 decoding, config parsing and checkpoint layout with those
fixtures (tests/unit/engine_core/mxfp4_test.cc, gpt_oss_config_test.cc,
gpt_oss_checkpoint_test.cc). This test re-runs their generator
(tests/python/engine_ref/make_gpt_oss_fixtures.py) with the venv's transformers and checks the
committed files still hold the same reference values: the configs and what GptOssConfig reads
from them, the tensor names and shapes save_pretrained writes, the MXFP4 bytes and the parameters
from_pretrained dequantizes from them (bit for bit). The randomly initialized non-expert weights
are not compared (they depend on torch's init, not on the formats).
"""
import json
import pathlib

import torch
from safetensors.torch import load_file

from engine_ref import make_gpt_oss_fixtures

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "data" / "gpt_oss"


def load_json(path):
    return json.loads(pathlib.Path(path).read_text())


def shard_tensors(model_dir: pathlib.Path, predicate) -> dict:
    out = {}
    for shard in sorted(model_dir.glob("model-*.safetensors")):
        out.update({k: v for k, v in load_file(str(shard)).items() if predicate(k, v)})
    return out


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    view = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.uint8: torch.uint8}
    return torch.equal(a.view(view[a.dtype]), b.view(view[b.dtype]))


def test_committed_fixtures_match_transformers(tmp_path):
    make_gpt_oss_fixtures.make(str(tmp_path))
    fresh = tmp_path

    config_files = sorted(p.name for p in (FIXTURES / "configs").glob("*.json"))
    assert config_files == sorted(p.name for p in (fresh / "configs").glob("*.json"))
    for name in config_files:
        assert load_json(FIXTURES / "configs" / name) == load_json(fresh / "configs" / name), name

    assert load_json(FIXTURES / "tiny_bf16" / "tensors.json") == \
        load_json(fresh / "tiny_bf16" / "tensors.json")
    index = load_json(FIXTURES / "tiny_bf16" / "model.safetensors.index.json")
    assert len(set(index["weight_map"].values())) > 1, "the bf16 fixture must be sharded"
    assert set(index["weight_map"]) == set(load_json(FIXTURES / "tiny_bf16" / "tensors.json"))

    for rel in ["tiny_mxfp4/model.safetensors.index.json", "tiny_mxfp4/config.json"]:
        assert load_json(FIXTURES / rel) == load_json(fresh / rel), rel

    def packed(_, t):
        return t.dtype == torch.uint8

    committed_bytes = shard_tensors(FIXTURES / "tiny_mxfp4", packed)
    fresh_bytes = shard_tensors(fresh / "tiny_mxfp4", packed)
    assert sorted(committed_bytes) == sorted(fresh_bytes)
    assert len(committed_bytes) == 8  # blocks and scales of two projections in two layers
    for name, t in committed_bytes.items():
        assert same_bits(t, fresh_bytes[name]), name

    committed = load_file(str(FIXTURES / "tiny_mxfp4" / "expected.safetensors"))
    regenerated = load_file(str(fresh / "tiny_mxfp4" / "expected.safetensors"))
    assert sorted(committed) == sorted(regenerated)
    for name, t in committed.items():
        assert same_bits(t, regenerated[name]), name
    # Layer 0 covers every E8M0 scale, so the reference holds overflowed values.
    assert torch.isinf(committed["model.layers.0.mlp.experts.gate_up_proj.float32"]).any()
