"""A pre-norm vision transformer (ViT) over image patches, and its rules.

`VisionTransformerBlock` is the SigLIP-style block of PaliGemma's and Gemma
3's vision towers; `VisionTransformerEncoder` is the tower around it (conv
patch embedding, learned positions, the blocks, a final layer norm). Both
keep the checkpoints' names (`encoder_block_0/multi_head_attention/
query_proj`, ...). `vision_transformer_rules` lays them out like a text
stack: heads and the MLP width on the model axis, hidden on the data axis.
"""

import keras
from keras import ops

from keras_nlp.distribution.dims import declare_dims
from keras_nlp.distribution.dims import declare_flat_heads
from keras_nlp.distribution.layout_map import pin_input
from keras_nlp.distribution.rules import DATA
from keras_nlp.distribution.rules import MODEL
from keras_nlp.layers.dense import named_dense
from keras_nlp.layers.layout_rules import named_rule
from keras_nlp.layers.layout_rules import position_embedding_rules
from keras_nlp.layers.remat import RematBlock

# The projections are flat `(hidden, heads * head_dim)` in the checkpoints:
# the concatenated heads are named `heads`, and the query, key and value
# projections' are declared flat, so a model axis splits them only between
# heads.
PROJECTION_DIMS = ("hidden", "heads")
OUTPUT_PROJECTION_DIMS = ("heads", "hidden")
PATCH_KERNEL_DIMS = ("patch_height", "patch_width", "channels", "hidden")
_HEADS_ON_MODEL = {"heads": MODEL, "ffw": MODEL, "hidden": DATA}


class VisionSelfAttention(keras.layers.Layer):
    """Multi-head self-attention over patches, with biased projections.

    Four flat projections `query_proj`, `key_proj`, `value_proj` and
    `out_proj` (kernels `(hidden, hidden)`, biases `(hidden,)`); every
    patch attends to every patch, with queries scaled by
    `head_dim ** -0.5`.

    Args:
        num_heads: int. Number of heads; must divide the input width.
        **kwargs: Forwarded to `keras.layers.Layer` (`name`, `dtype`).
    """

    def __init__(self, num_heads, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads

    def build(self, input_shape):
        hidden_dim = input_shape[-1]
        if hidden_dim % self.num_heads:
            raise ValueError(
                f"The width {hidden_dim} must be divisible by num_heads="
                f"{self.num_heads}."
            )
        self.head_dim = hidden_dim // self.num_heads

        heads = ((self.num_heads, self.head_dim),)

        def dense(name, dims):
            layer = named_dense(
                hidden_dim, dims, name=name, dtype=self.dtype_policy
            )
            if dims[-1] == "heads":
                # Split only between the heads it makes (the output
                # projection's rows are contracted: any split is exact).
                declare_flat_heads(layer, "kernel", heads=heads)
                declare_flat_heads(layer, "bias", heads=heads)
            layer.build(input_shape)
            return layer

        self.query_proj = dense("query_proj", PROJECTION_DIMS)
        self.key_proj = dense("key_proj", PROJECTION_DIMS)
        self.value_proj = dense("value_proj", PROJECTION_DIMS)
        self.out_proj = dense("out_proj", OUTPUT_PROJECTION_DIMS)

    def call(self, inputs):
        def heads(x):
            shape = ops.shape(x)
            return ops.reshape(
                x, (shape[0], shape[1], self.num_heads, self.head_dim)
            )

        query = heads(self.query_proj(inputs))
        key = heads(self.key_proj(inputs))
        value = heads(self.value_proj(inputs))
        scores = ops.einsum("btnh,bsnh->bnts", query, key)
        scores = scores / ops.cast(ops.sqrt(float(self.head_dim)), scores.dtype)
        # Softmax in float32 whatever the compute dtype.
        probs = ops.softmax(ops.cast(scores, "float32"), axis=-1)
        probs = ops.cast(probs, value.dtype)
        x = ops.einsum("bnts,bsnh->btnh", probs, value)
        shape = ops.shape(x)
        x = ops.reshape(x, (shape[0], shape[1], shape[2] * shape[3]))
        return self.out_proj(pin_input(self.out_proj, x))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads})
        return config


class VisionTransformerBlock(RematBlock, keras.layers.Layer):
    """Pre-norm ViT block: self-attention and an MLP, both with biases.

    Computes

        h = x + multi_head_attention(layer_norm_1(x))
        y = h + mlp_dense_2(gelu(mlp_dense_1(layer_norm_2(h))))

    with the tanh approximation of GELU and `LayerNormalization`s. The
    width is the input's.

    Args:
        num_heads: int. Attention heads; must divide the width.
        intermediate_dim: int. Width of the MLP.
        layer_norm_epsilon: float. Epsilon of both norms. Defaults to `1e-6`.
        **kwargs: Forwarded to `keras.layers.Layer` (`name`, `dtype`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.layers import VisionTransformerBlock

    block = VisionTransformerBlock(num_heads=2, intermediate_dim=32)
    outputs = block(np.ones((2, 9, 16), "float32"))  # shape (2, 9, 16)
    ```
    """

    def __init__(
        self, num_heads, intermediate_dim, layer_norm_epsilon=1e-6, **kwargs
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.layer_norm_epsilon = layer_norm_epsilon

    def build(self, input_shape):
        hidden_dim = input_shape[-1]
        width = (None, None, hidden_dim)

        def norm(name):
            layer = keras.layers.LayerNormalization(
                epsilon=self.layer_norm_epsilon,
                dtype=self.dtype_policy,
                name=name,
            )
            layer.build(width)
            return layer

        self.attention = VisionSelfAttention(
            self.num_heads,
            dtype=self.dtype_policy,
            name="multi_head_attention",
        )
        self.attention.build(width)
        self.layer_norm_1 = norm("layer_norm_1")
        self.mlp_dense_1 = named_dense(
            self.intermediate_dim,
            ("hidden", "ffw"),
            name="mlp_dense_1",
            dtype=self.dtype_policy,
        )
        self.mlp_dense_1.build(width)
        self.mlp_dense_2 = named_dense(
            hidden_dim,
            ("ffw", "hidden"),
            name="mlp_dense_2",
            dtype=self.dtype_policy,
        )
        self.mlp_dense_2.build((None, None, self.intermediate_dim))
        self.layer_norm_2 = norm("layer_norm_2")

    def call(self, inputs):
        residual = inputs + self.attention(self.layer_norm_1(inputs))
        x = self.mlp_dense_1(self.layer_norm_2(residual))
        x = self.mlp_dense_2(keras.activations.gelu(x, approximate=True))
        return residual + x

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config


def images_output_spec(layer, images):
    """`layer`'s output spec from the shape of `images`, any array.

    Keras hands `compute_output_shape` the shapes of tensors only (a NumPy
    array arrives as `None`); every array has a `.shape`.
    """
    shape = layer.compute_output_shape(tuple(images.shape))
    return keras.KerasTensor(shape, dtype=layer.compute_dtype)


class PatchEmbedding(keras.layers.Layer):
    """Square patches to vectors: a strided conv plus learned positions.

    `embedding_conv` (kernel `(patch, patch, 3, hidden)`) and
    `position_embedding` (`(num_patches, hidden)`), added per patch in
    row-major order.

    Args:
        image_size: int. Height and width of the (square) images.
        patch_size: int. Height and width of each patch.
        hidden_dim: int. Width of the patch vectors.
        **kwargs: Forwarded to `keras.layers.Layer` (`name`, `dtype`).
    """

    def __init__(self, image_size, patch_size, hidden_dim, **kwargs):
        super().__init__(**kwargs)
        self.image_size = image_size
        self.patch_size = patch_size
        self.hidden_dim = hidden_dim
        self.num_patches = (image_size // patch_size) ** 2

    def build(self, input_shape):
        self.patch_embedding = keras.layers.Conv2D(
            self.hidden_dim,
            kernel_size=self.patch_size,
            strides=self.patch_size,
            padding="valid",
            dtype=self.dtype_policy,
            name="embedding_conv",
        )
        declare_dims(
            self.patch_embedding, kernel=PATCH_KERNEL_DIMS, bias=("hidden",)
        )
        self.patch_embedding.build(input_shape)
        self.position_embedding = keras.layers.Embedding(
            self.num_patches,
            self.hidden_dim,
            dtype=self.dtype_policy,
            name="position_embedding",
        )
        declare_dims(self.position_embedding, embeddings=("position", "hidden"))
        self.position_embedding.build((1, self.num_patches))

    def call(self, images):
        x = self.patch_embedding(images)
        x = ops.reshape(x, (ops.shape(x)[0], -1, self.hidden_dim))
        # Through the layer, not its `embeddings`: a quantized table holds
        # int8 values that only its call scales back.
        positions = ops.arange(self.num_patches, dtype="int32")
        return x + self.position_embedding(positions)[None]

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.num_patches, self.hidden_dim)

    def compute_output_spec(self, images):
        return images_output_spec(self, images)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "image_size": self.image_size,
                "patch_size": self.patch_size,
                "hidden_dim": self.hidden_dim,
            }
        )
        return config


class VisionTransformerEncoder(keras.layers.Layer):
    """Images to patch sequences: `PatchEmbedding`, blocks, a final norm.

    Sublayers `encoder_embeddings`, `encoder_block_{i}` (each a
    `VisionTransformerBlock`) and `encoder_layer_norm`: the names of the
    PaliGemma and Gemma 3 checkpoints under `image_encoder/`.

    Args:
        image_size: int. Height and width of the (square) images.
        patch_size: int. Height and width of each patch.
        hidden_dim: int. Width of the patch vectors.
        num_layers: int. Number of blocks.
        num_heads: int. Attention heads per block.
        intermediate_dim: int. MLP width.
        layer_norm_epsilon: float. Epsilon of every norm. Defaults to
            `1e-6`.
        **kwargs: Forwarded to `keras.layers.Layer` (`name`, `dtype`).

    Example:

    ```python
    import numpy as np
    from keras_nlp.layers import VisionTransformerEncoder

    encoder = VisionTransformerEncoder(
        image_size=8,
        patch_size=4,
        hidden_dim=16,
        num_layers=1,
        num_heads=2,
        intermediate_dim=32,
    )
    patches = encoder(np.ones((2, 8, 8, 3), "float32"))  # shape (2, 4, 16)
    ```
    """

    def __init__(
        self,
        image_size,
        patch_size,
        hidden_dim,
        num_layers,
        num_heads,
        intermediate_dim,
        layer_norm_epsilon=1e-6,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.image_size = image_size
        self.patch_size = patch_size
        self.hidden_dim = hidden_dim
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.layer_norm_epsilon = layer_norm_epsilon
        self.embeddings = PatchEmbedding(
            image_size,
            patch_size,
            hidden_dim,
            dtype=self.dtype_policy,
            name="encoder_embeddings",
        )
        self.blocks = [
            VisionTransformerBlock(
                num_heads,
                intermediate_dim,
                layer_norm_epsilon=layer_norm_epsilon,
                dtype=self.dtype_policy,
                name=f"encoder_block_{index}",
            )
            for index in range(num_layers)
        ]
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon,
            dtype=self.dtype_policy,
            name="encoder_layer_norm",
        )

    def build(self, input_shape):
        self.embeddings.build(input_shape)
        width = (None, None, self.hidden_dim)
        for block in self.blocks:
            block.build(width)
        self.layer_norm.build(width)

    def call(self, images):
        x = self.embeddings(images)
        for block in self.blocks:
            x = block(x)
        return self.layer_norm(x)

    def compute_output_shape(self, input_shape):
        return self.embeddings.compute_output_shape(input_shape)

    def compute_output_spec(self, images):
        return images_output_spec(self, images)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "image_size": self.image_size,
                "patch_size": self.patch_size,
                "hidden_dim": self.hidden_dim,
                "num_layers": self.num_layers,
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config


def vision_transformer_rules(prefix):
    """Layout rules of a `VisionTransformerEncoder` whose path is `prefix`.

    Like a text stack: the flat heads of the attention projections and the
    MLP width on the model axis, hidden on the data axis; the patch conv's
    output width on the model axis (its `patch x patch x 3` inputs are
    tiny); the position table like a text one. Rank-1 weights (norms,
    output biases) are left replicated.
    """
    block = prefix + r"encoder_block_\d+/"
    attention = block + "multi_head_attention/"
    embeddings = prefix + "encoder_embeddings/"
    return [
        named_rule(
            embeddings + "embedding_conv/kernel",
            PATCH_KERNEL_DIMS,
            {"hidden": MODEL},
        ),
        *position_embedding_rules(embeddings + "position_embedding/"),
        named_rule(
            attention + "(query_proj|key_proj|value_proj)/kernel",
            PROJECTION_DIMS,
            _HEADS_ON_MODEL,
        ),
        named_rule(
            attention + "(query_proj|key_proj|value_proj)/bias",
            ("heads",),
            {"heads": MODEL},
        ),
        named_rule(
            attention + "out_proj/kernel",
            OUTPUT_PROJECTION_DIMS,
            _HEADS_ON_MODEL,
        ),
        named_rule(
            block + "mlp_dense_1/kernel", ("hidden", "ffw"), _HEADS_ON_MODEL
        ),
        named_rule(block + "mlp_dense_1/bias", ("ffw",), {"ffw": MODEL}),
        named_rule(
            block + "mlp_dense_2/kernel", ("ffw", "hidden"), _HEADS_ON_MODEL
        ),
    ]
