"""`Backbone.quantize` under a layout map: every new variable planned first."""

import keras

from keras_nlp.distribution.layout_map import layout_map_of
from keras_nlp.distribution.layout_map import verify_layouts
from keras_nlp.distribution.quantized import plan_quantized


class QuantizationMixin:
    """Mixin of `Backbone`: `quantize` keeps a sharded backbone sharded."""

    def quantize(self, mode=None, config=None, filters=None, **kwargs):
        """Keras's `quantize`, with the new variables laid out by the plan.

        Without a layout plan this is `keras.Model.quantize`. A backbone
        built under a `ModelParallel` scope from `get_layout_map` is
        quantized inside that scope: the int8 kernels keep their layouts,
        and the scales and float8 statistics Keras adds are planned from
        their kernels before they are created
        (`keras_nlp.distribution.quantized`), then checked.

        Args:
            mode: `"int8"`, `"float8"`, ... as for `keras.Model.quantize`
                (under a layout map: `"int8"`, `"int4"` or `"float8"`).
            config: a `keras.quantizers.QuantizationConfig`, as Keras takes.
            filters: a regex, a list of them, or a callable, as Keras takes.

        Example:

        ```python
        import keras
        from keras_nlp.distribution import ModelParallel
        from keras_nlp.models import LlamaBackbone

        config = dict(
            vocabulary_size=64, num_layers=1, num_query_heads=4,
            num_key_value_heads=2, hidden_dim=32, intermediate_dim=64,
        )
        mesh = keras.distribution.DeviceMesh(
            (1, 2), ("batch", "model"), keras.distribution.list_devices()[:2]
        )
        layout_map = LlamaBackbone.get_layout_map(mesh, config=config)
        with ModelParallel(layout_map=layout_map).scope():
            backbone = LlamaBackbone(**config)
            backbone.quantize("int8")
        backbone.layout_plan.weight(
            "transformer_layer_0/self_attention/query/kernel_scale"
        ).spec  # (None, None, "model", None)
        ```
        """
        plan = self.layout_plan
        if plan is None:
            return super().quantize(
                mode, config=config, filters=filters, **kwargs
            )
        layout_map = layout_map_of(
            self, "quantize", "the quantized weights and their scales"
        )
        if mode is None and isinstance(
            config, keras.quantizers.QuantizationConfig
        ):
            mode = config.mode
        quantized = plan_quantized(self, plan, mode, filters, config)
        # int4 kernels are deleted and created again, packed.
        before = {w.path: w.shape for w in plan.weights}
        layout_map.extend(
            quantized,
            recreated=[
                w.path
                for w in quantized.weights
                if before.get(w.path, w.shape) != w.shape
            ],
        )
        super().quantize(mode, config=config, filters=filters, **kwargs)
        verify_layouts(self, quantized, layout_map.device_mesh)
        self._layout_plan = quantized
