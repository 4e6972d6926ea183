"""Winograd F(2x2, 3x3) transform ops of the `graph` dialect, used by `winograd-conv`.

A 3x3 convolution with stride 1 becomes, per 4x4 input tile `d` (stride 2)
and per 2x2 output tile, `Y = A^T [ sum_c (G g G^T) . (B^T d B) ] A`
(Lavin and Gray, 2016). `winograd-conv` writes it as three graph ops:

* `graph.winograd_input`: `V[xi*4 + nu, c, p] = (B^T d_p B)[xi, nu]`, for tile
  `p = (n*TH + t)*TW + u` of channel `c` (the input zero-padded by `pads`);
* a batched `graph.matmul` of the transformed weight `U[16, O, C]` (computed
  at compile time) with `V[16, C, P]`: `M[16, O, P]`;
* `graph.winograd_output`: `Y[n, o, 2t + a, 2u + b] = (A^T M_p A)[a, b]`.

The multiplies drop from 9 to 4 per output pixel and input channel.

graph.py imports this module at its end (like graph_layout.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import DenseArrayBase, TensorType
from xdsl.irdl import IRDLOperation, ParsePropInAttrDict, irdl_op_definition, operand_def, prop_def, result_def, traits_def
from xdsl.traits import Pure

from ziggurat.dialects.graph_base import OpPattern, PatternKind, int_array, ints_of, require, shape_of

# F(2x2, 3x3): V = B^T d B, U = G g G^T, Y = A^T M A.
BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64)
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64)
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64)


def transform_weight(w: np.ndarray) -> np.ndarray:
    """OIHW 3x3 weights `[O, C, 3, 3]` -> `U[16, O, C]` with `U[xi*4 + nu] = (G g G^T)[xi, nu]`."""
    u = np.einsum("xi,ocij,yj->xyoc", G, w.astype(np.float64), G)
    return u.reshape(16, w.shape[0], w.shape[1]).astype(np.float32)


def tiles(h: int, w: int) -> tuple[int, int]:
    """Output tiles (rows, columns) of an `h x w` output: 2x2 each."""
    return h // 2, w // 2


@irdl_op_definition
class WinogradInputOp(IRDLOperation):
    """Input transform: `[N, C, H, W]` -> `[16, C, N*TH*TW]` (`TH = (H + top + bottom - 2) / 2`).

    ```mlir
    %v = graph.winograd_input %x {pads = array<i64: 1, 1, 1, 1>} : tensor<1x16x8x8xf32> -> tensor<16x16x16xf32>
    ```
    """

    name = "graph.winograd_input"
    input = operand_def(TensorType)
    pads = prop_def(DenseArrayBase)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.OPAQUE))
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input, pads: Sequence[int], result_type):
        super().__init__(operands=[input], properties={"pads": int_array(pads)}, result_types=[result_type])

    def tile_grid(self) -> tuple[int, int]:
        n, c, h, w = shape_of(self.input)
        t, l, b, r = ints_of(self.pads)
        return (h + t + b - 2) // 2, (w + l + r - 2) // 2

    def verify_(self) -> None:
        x, r, p = shape_of(self.input), shape_of(self.result), ints_of(self.pads)
        require(len(x) == 4, self, f"expects an NCHW input, got shape {x}")
        require(len(p) == 4 and min(p) >= 0, self, f"pads must be 4 values >= 0 [top, left, bottom, right], got {list(p)}")
        hp, wp = x[2] + p[0] + p[2], x[3] + p[1] + p[3]
        require(hp >= 4 and wp >= 4 and hp % 2 == 0 and wp % 2 == 0, self,
                 f"the padded input {hp}x{wp} must be even and at least 4x4 (2x2 output tiles of a 3x3 filter)")
        th, tw = self.tile_grid()
        want = (16, x[1], x[0] * th * tw)
        require(r == want, self, f"result shape {r} should be {want}")


@irdl_op_definition
class WinogradOutputOp(IRDLOperation):
    """Output transform: `[16, O, N*TH*TW]` -> `[N, O, 2*TH, 2*TW]`.

    ```mlir
    %y = graph.winograd_output %m : tensor<16x16x16xf32> -> tensor<1x16x8x8xf32>
    ```
    """

    name = "graph.winograd_output"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure(), OpPattern(PatternKind.INJECTIVE))
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input, result_type):
        super().__init__(operands=[input], result_types=[result_type])

    def verify_(self) -> None:
        m, r = shape_of(self.input), shape_of(self.result)
        require(len(m) == 3 and m[0] == 16 and len(r) == 4, self, f"expects [16, O, P] -> [N, O, H, W], got {m} -> {r}")
        require(r[2] % 2 == 0 and r[3] % 2 == 0 and m[1] == r[1] and m[2] == r[0] * (r[2] // 2) * (r[3] // 2), self,
                 f"result shape {r} does not hold the 2x2 output tiles of {m}")


WINOGRAD_OPS = [WinogradInputOp, WinogradOutputOp]
