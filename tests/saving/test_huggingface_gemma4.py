"""Hugging Face Gemma 4 text checkpoints against keras-hub.

See `tests/saving/huggingface_checkpoints.py`. keras-hub's exporter writes
a `gemma4_text` checkpoint of a tiny backbone with every text option: two
local and two global layers with their own heads (one global key/value
head whose keys are the values, half of each global head rotated), the
last two layers sharing layers 0 and 1's keys and values (their
checkpoint has no `k_proj`/`v_proj`) with double-wide feed-forwards,
per-layer inputs, and four experts beside each feed-forward.
"""

import json

import numpy as np
from safetensors.numpy import load_file
from safetensors.numpy import save_file

from keras_nlp.models import Backbone
from tests.models.backbone_checks import random_inputs
from tests.models.tiny_configs import gemma4_config
from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import HuggingFaceFamilyTests
from tests.saving.huggingface_checkpoints import assert_real_outputs_close


def _inputs(vocabulary_size):
    """Token ids and a padding mask, and keras-hub's `position_ids` (the
    token indices, what our RoPE reads; our backbone ignores them)."""
    inputs = random_inputs(vocabulary_size, length=10)
    batch, length = inputs["token_ids"].shape
    positions = np.broadcast_to(
        np.arange(length, dtype="int32"), (batch, length)
    )
    return dict(inputs, position_ids=np.array(positions))


class TestGemma4Checkpoints(HuggingFaceFamilyTests):
    cases = [
        HFCase(
            "gemma4_text_every_option",
            "Gemma4Backbone",
            gemma4_config(
                vocabulary_size=96,
                hidden_dim=32,
                intermediate_dim=48,
                enable_moe_block=True,
                num_experts=4,
                expert_intermediate_dim=16,
                num_experts_per_token=2,
            ),
            inputs=_inputs,
        )
    ]
    meshes = ((2, 4),)

    def test_gemma4_text_config_and_towers(self, case, checkpoint, tmp_path):
        # The same text model as a `gemma4` checkpoint: its config nested
        # in `text_config` (next to a vision config), its tensors under
        # `model.language_model.`, and tower tensors, which are skipped.
        path, _, inputs, expected = checkpoint
        tensors = {
            name.replace("model.", "model.language_model.", 1): value
            for name, value in load_file(
                str(path / "model.safetensors")
            ).items()
        }
        tensors["model.vision_tower.patch_embedder.weight"] = np.ones(
            (4, 3), "float32"
        )
        text = json.loads((path / "config.json").read_text())
        config = {
            "model_type": "gemma4",
            "architectures": ["Gemma4ForConditionalGeneration"],
            "text_config": text,
            "vision_config": {"model_type": "gemma4_vision", "hidden_size": 4},
            "image_token_id": 5,
        }
        written = tmp_path / "gemma4"
        written.mkdir()
        save_file(tensors, str(written / "model.safetensors"))
        (written / "config.json").write_text(json.dumps(config))
        ours = Backbone.from_preset(str(written))
        assert ours.get_config()["vision_encoder"] is None
        assert_real_outputs_close(case, inputs, ours, expected)
