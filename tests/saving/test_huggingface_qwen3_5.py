"""Hugging Face Qwen 3.5 checkpoints against keras-hub.

See `tests/saving/huggingface_checkpoints.py`. keras-hub's exporter writes
a `qwen3_5` checkpoint (the text config nested, tensors under
`model.language_model.`) of a tiny backbone with every option its format
has: linear attention blocks (4 value heads reading 2 key heads, a
convolution of 3) around a full attention block (4:2 heads, half of each
head rotated), an untied output projection.
"""

from tests.models.tiny_configs import qwen3_5_config
from tests.saving.huggingface_checkpoints import HFCase
from tests.saving.huggingface_checkpoints import HuggingFaceFamilyTests


class TestQwen3_5Checkpoints(HuggingFaceFamilyTests):
    cases = [
        HFCase(
            "qwen3_5_every_option",
            "Qwen3_5Backbone",
            qwen3_5_config(
                vocabulary_size=96,
                hidden_dim=32,
                intermediate_dim=48,
                num_layers=3,
                layer_types=[
                    "linear_attention",
                    "full_attention",
                    "linear_attention",
                ],
                sliding_window_size=None,
                rope_max_wavelength=10000,
            ),
        )
    ]
    meshes = ((2, 4),)
