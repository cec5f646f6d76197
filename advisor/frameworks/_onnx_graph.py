"""Build an :mod:`advisor.models` spec as a plain ONNX graph, ready for ORT's artifact generator.

The graph takes NCHW float32 with a symbolic batch dimension and returns logits. Weights are
initializers drawn from numpy with a fixed seed (He-normal kernels, zero biases), so a seed
gives the same starting point on every run.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from advisor.models import ModelSpec, layer_shapes

__all__ = ["OPSET", "IR_VERSION", "INPUT_NAME", "OUTPUT_NAME", "build_model"]

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
        The model (opset :data:`OPSET`, IR version :data:`IR_VERSION`); every initializer is a
        trainable parameter.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes: list[Any] = []
    inits: list[Any] = []
    current = INPUT_NAME
    shapes = list(layer_shapes(spec, tuple(input_shape), num_classes))
    for i, (layer, shape_in, shape_out) in enumerate(shapes):
        last = i == len(shapes) - 1
        out = OUTPUT_NAME if last and layer.activation is None else f"{layer.kind}{i}"
        if layer.kind == "conv":
            k, cin, cout = layer.kernel, shape_in[2], shape_out[2]
            w, b = f"conv{i}.weight", f"conv{i}.bias"
            inits.append(numpy_helper.from_array(_he_normal(rng, (cout, cin, k, k), cin * k * k), w))
            inits.append(numpy_helper.from_array(np.zeros(cout, np.float32), b))
            begin = (k - 1) // 2  # "same" padding; an even kernel puts the extra row at the end
            end = k - 1 - begin
            nodes.append(helper.make_node(
                "Conv", [current, w, b], [out], kernel_shape=[k, k], strides=[1, 1],
                pads=[begin, begin, end, end],
            ))
        elif layer.kind == "maxpool":
            nodes.append(helper.make_node("MaxPool", [current], [out], kernel_shape=[2, 2], strides=[2, 2]))
        elif layer.kind == "avgpool":
            nodes.extend(_avg_pool_nodes(current, out, shape_in, prefix=f"avgpool{i}"))
        elif layer.kind == "flatten":
            nodes.append(helper.make_node("Flatten", [current], [out], axis=1))
        else:
            fan_in, units = shape_in[0], shape_out[0]
            w, b = f"dense{i}.weight", f"dense{i}.bias"
            inits.append(numpy_helper.from_array(_he_normal(rng, (fan_in, units), fan_in), w))
            inits.append(numpy_helper.from_array(np.zeros(units, np.float32), b))
            nodes.append(helper.make_node("Gemm", [current, w, b], [out]))
        current = out
        if layer.activation == "relu":
            relu_out = OUTPUT_NAME if last else f"relu{i}"
            nodes.append(helper.make_node("Relu", [current], [relu_out]))
            current = relu_out
    if current != OUTPUT_NAME:  # a spec that does not end in a layer (never in MODELS)
        nodes.append(helper.make_node("Identity", [current], [OUTPUT_NAME]))
    h, w_, c = input_shape
    graph = helper.make_graph(
        nodes,
        spec.name,
        [helper.make_tensor_value_info(INPUT_NAME, TensorProto.FLOAT, ["batch", c, h, w_])],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["batch", num_classes])],
        initializer=inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="advisor"
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model
