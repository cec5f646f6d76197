"""Build an :mod:`advisor.models` spec as a plain ONNX graph, ready for ORT's artifact generator.

The graph takes NCHW float32 with a symbolic batch dimension and returns logits. Weights are
initializers drawn from numpy with a fixed seed (He-normal kernels, zero biases), so a seed
gives the same starting point on every run. A residual block is its body's nodes and an ``Add``.

Batch norm is ONNX's own ``BatchNormalization`` in training mode (``training_mode=1``, batch
statistics, running statistics as outputs), which ORT's gradient builder turns into its
``BatchNormInternal``/``BatchNormalizationGrad`` pair. Its running statistics are initializers
kept out of the trainable parameters (:func:`split_parameters`) and updated in place by the kernel;
the eval graph, which ORT derives with ``training_mode=0``, normalises with them
(:func:`fix_eval_model` makes it loadable).
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from advisor.models import BN_EPS, BN_MOMENTUM, Layer, ModelSpec, Shaped, layer_shapes, sequence_shapes

__all__ = [
    "OPSET", "IR_VERSION", "INPUT_NAME", "OUTPUT_NAME", "build_model", "split_parameters", "fix_eval_model",
]

# onnxruntime-training 1.19 runs opset <= 21 and IR <= 10; onnx 1.17 writes IR 10 by default.
# Opset 17 / IR 9 keep the files loadable by older runtimes too.
OPSET = 17
IR_VERSION = 9
INPUT_NAME = "input"
OUTPUT_NAME = "logits"


def _he_normal(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)


def _avg_pool_nodes(source: str, out: str, shape_in: tuple[int, ...], *, prefix: str) -> list[Any]:
    """2x2 / stride-2 average pooling (floor) of NCHW ``source`` as Slice, Reshape and ReduceMean.

    Not ``AveragePool``: the CPU ``AveragePoolGrad`` kernel of onnxruntime-training 1.19.2 dies
    with SIGFPE (found while building this backend). The result is the same; the reshape keeps it
    as cheap as a pooling op. Shapes are static apart from the batch, so the constants are
    ``Constant`` nodes, never initializers, and stay out of the trainable parameters.
    """
    from onnx import helper, numpy_helper

    h, w, c = shape_in
    h2, w2 = h // 2, w // 2
    nodes = []
    current = source
    if h % 2 or w % 2:  # floor: drop the last odd row / column, as AveragePool does
        consts = {"starts": [0, 0], "ends": [2 * h2, 2 * w2], "axes": [2, 3]}
        for key, value in consts.items():
            nodes.append(helper.make_node(
                "Constant", [], [f"{prefix}.{key}"],
                value=numpy_helper.from_array(np.array(value, np.int64), f"{prefix}.{key}"),
            ))
        nodes.append(helper.make_node(
            "Slice", [current] + [f"{prefix}.{k}" for k in consts], [f"{prefix}.cropped"]
        ))
        current = f"{prefix}.cropped"
    shape = np.array([0, c, h2, 2, w2, 2], np.int64)  # 0 keeps the (symbolic) batch size
    nodes.append(helper.make_node(
        "Constant", [], [f"{prefix}.shape"], value=numpy_helper.from_array(shape, f"{prefix}.shape")
    ))
    nodes.append(helper.make_node("Reshape", [current, f"{prefix}.shape"], [f"{prefix}.blocks"]))
    nodes.append(helper.make_node("ReduceMean", [f"{prefix}.blocks"], [out], axes=[3, 5], keepdims=0))
    return nodes


def build_model(spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int, *, seed: int) -> Any:
    """Return an ``onnx.ModelProto`` for ``spec`` on NHWC ``input_shape``.

    Args:
        spec: The architecture.
        input_shape: ``(height, width, channels)`` as in :mod:`advisor.models`; the graph's input
            is the NCHW transpose of it.
        num_classes: Size of the classifier layer.
        seed: Seed of the weight initialisation.

    Returns:
        The model (opset :data:`OPSET`, IR version :data:`IR_VERSION`). Every initializer is a
        trainable parameter except batch norm's running statistics (see :func:`split_parameters`).
        Batch norm is in training mode; ORT's artifact generator derives the eval graph from it.
    """
    import onnx
    from onnx import TensorProto, helper

    graph = _Graph(np.random.default_rng(seed), spec.name)
    current = graph.sequence(layer_shapes(spec, tuple(input_shape), num_classes), INPUT_NAME, prefix="")
    if graph.nodes and graph.nodes[-1].output[0] == current:
        graph.nodes[-1].output[0] = OUTPUT_NAME
    else:  # a spec that does not end in a layer (never in MODELS)
        graph.node("Identity", [current], [OUTPUT_NAME])
    h, w, c = input_shape
    proto = helper.make_graph(
        graph.nodes,
        spec.name,
        [helper.make_tensor_value_info(INPUT_NAME, TensorProto.FLOAT, ["batch", c, h, w])],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["batch", num_classes])],
        initializer=graph.inits,
    )
    model = helper.make_model(
        proto, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="advisor"
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def split_parameters(model: Any) -> tuple[list[str], list[str]]:
    """``(trainable, frozen)`` initializer names of a :func:`build_model` graph.

    The frozen ones are batch norm's running statistics: ORT's artifact generator must be told
    (``frozen_params``), or it tries to differentiate them. They are still updated: the CPU kernel
    of ``BatchNormalization`` in training mode aliases its running-statistics outputs to those
    inputs, so the sequential executor writes the new values into the training state in place.
    """
    names = [init.name for init in model.graph.initializer]
    frozen = [n for n in names if n.endswith(_RUNNING_STATS)]
    return [n for n in names if n not in frozen], frozen


def fix_eval_model(path: Any) -> None:
    """Make the eval graph ORT's artifact generator wrote for a batch-norm spec loadable.

    onnxruntime-training 1.19.2 turns each ``BatchNormalization`` of the eval graph to
    ``training_mode=0`` but keeps its three outputs, which the ONNX checker (and so ``Module``)
    refuses for inference mode; this drops the running-statistics outputs, which nothing reads.
    A graph without batch norm is left untouched.
    """
    import onnx

    model = onnx.load(path)
    changed = False
    for node in model.graph.node:
        if node.op_type == "BatchNormalization" and len(node.output) > 1:
            del node.output[1:]
            changed = True
    if changed:
        onnx.save(model, path)


_RUNNING_STATS = (".running_mean", ".running_var")


class _Graph:
    """Nodes and initializers of the graph being built, in order."""

    def __init__(self, rng: np.random.Generator, model: str) -> None:
        self.rng = rng
        self.model = model
        self.nodes: list[Any] = []
        self.inits: list[Any] = []

    def node(self, op: str, inputs: list[str], outputs: list[str], **attrs: Any) -> None:
        from onnx import helper

        self.nodes.append(helper.make_node(op, inputs, outputs, **attrs))

    def init(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def sequence(self, shaped: Iterable[Shaped], source: str, *, prefix: str) -> str:
        """Emit each layer after ``source``; return the name of the last output."""
        current = source
        for i, (layer, shape_in, shape_out) in enumerate(shaped):
            current = self.layer(layer, shape_in, shape_out, current, f"{prefix}{layer.kind}{i}")
            if layer.activation == "relu":
                self.node("Relu", [current], [f"{prefix}relu{i}"])
                current = f"{prefix}relu{i}"
        return current

    def layer(self, layer: Layer, shape_in: tuple[int, ...], shape_out: tuple[int, ...], source: str,
              name: str) -> str:
        """The one layer-kind dispatch of this backend: emit ``layer``, whose output is ``name``."""
        rng = self.rng
        if layer.kind == "conv":
            k, cin, cout = layer.kernel, shape_in[2], shape_out[2]
            inputs = [source, self.init(f"{name}.weight", _he_normal(rng, (cout, cin, k, k), cin * k * k))]
            if layer.bias:
                inputs.append(self.init(f"{name}.bias", np.zeros(cout, np.float32)))
            begin = (k - 1) // 2  # "same" padding; an even kernel puts the extra row at the end
            end = k - 1 - begin
            self.node("Conv", inputs, [name], kernel_shape=[k, k], strides=[1, 1], pads=[begin, begin, end, end])
        elif layer.kind == "maxpool":
            self.node("MaxPool", [source], [name], kernel_shape=[2, 2], strides=[2, 2])
        elif layer.kind == "avgpool":
            self.nodes.extend(_avg_pool_nodes(source, name, shape_in, prefix=name))
        elif layer.kind == "flatten":
            self.node("Flatten", [source], [name], axis=1)
        elif layer.kind == "bn":
            c = shape_in[2]
            params = [
                self.init(f"{name}.scale", np.ones(c, np.float32)),
                self.init(f"{name}.bias", np.zeros(c, np.float32)),
                self.init(f"{name}{_RUNNING_STATS[0]}", np.zeros(c, np.float32)),
                self.init(f"{name}{_RUNNING_STATS[1]}", np.ones(c, np.float32)),
            ]
            # Training mode (batch statistics); ONNX's momentum weighs the old running value.
            self.node(
                "BatchNormalization", [source, *params],
                [name, f"{name}.running_mean_out", f"{name}.running_var_out"],
                epsilon=BN_EPS, momentum=1.0 - BN_MOMENTUM, training_mode=1,
            )
        elif layer.kind == "gap":
            # ReduceMean, not GlobalAveragePool: its gradient is the one avgpool already relies on.
            self.node("ReduceMean", [source], [name], axes=[2, 3], keepdims=0)
        elif layer.kind == "residual":
            body_shapes = sequence_shapes(layer.body, shape_in, model=self.model)
            body = self.sequence(body_shapes, source, prefix=f"{name}.")
            self.node("Add", [source, body], [name])
        else:
            fan_in, units = shape_in[0], shape_out[0]
            w = self.init(f"{name}.weight", _he_normal(rng, (fan_in, units), fan_in))
            b = self.init(f"{name}.bias", np.zeros(units, np.float32))
            self.node("Gemm", [source, w, b], [name])
        return name
