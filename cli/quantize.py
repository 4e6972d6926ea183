"""`ziggurat quantize`: calibrate a float ONNX model and write its QDQ form (quantize.py).

    ziggurat quantize MODEL.onnx --calibrate a.npz [b.npz ...] -o MODEL.int8.onnx
                      [--method minmax|percentile|entropy] [--per-tensor] [--reduce-range]

Conv, MatMul and Gemm get uint8 activations and int8 weights (per output channel
unless --per-tensor), as onnxruntime's quantize_static(quant_format=QDQ) writes
them; ranges from running the model, compiled by ziggurat, on the calibration
inputs. --reduce-range keeps weights in [-64, 64] (exact on AVX2's vpmaddubsw).
Then: ziggurat compile/run MODEL.int8.onnx (docs/quantization.md).
"""

from __future__ import annotations

import argparse
import time


def cmd_quantize(args: argparse.Namespace) -> int:
    import onnx

    from ziggurat.quantize import load_calibration, quantize

    t0 = time.perf_counter()
    model = quantize(args.model, load_calibration(args.calibrate), method=args.method,
                     per_channel=not args.per_tensor, reduce_range=args.reduce_range, target=args.target)
    onnx.save(model, args.output)
    count = sum(n.op_type == "QuantizeLinear" for n in model.graph.node)
    print(f"wrote {args.output}: {count} quantized activation(s), {args.method} calibration on "
          f"{len(args.calibrate)} file(s), {time.perf_counter() - t0:.1f} s")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("quantize", help="calibrate a float ONNX model and write its QDQ (int8) form",
                       description=__doc__.splitlines()[0], epilog="\n".join(__doc__.splitlines()[2:]),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="the float .onnx model")
    p.add_argument("--calibrate", nargs="+", required=True, metavar="NPZ",
                   help="calibration inputs: .npz files with one array per graph input (a leading sample axis allowed)")
    p.add_argument("-o", "--output", required=True, help="where to write the QDQ model")
    p.add_argument("--method", choices=("minmax", "percentile", "entropy"), default="minmax",
                   help="how activation ranges are taken from the calibration values (default minmax)")
    p.add_argument("--per-tensor", action="store_true", help="one weight scale per tensor, not per output channel")
    p.add_argument("--reduce-range", action="store_true", help="7-bit weights ([-64, 64]), as onnxruntime's reduce_range")
    p.add_argument("--target", default="llvm", help="the target the calibration runs on (default: this host)")
    p.set_defaults(func=cmd_quantize)
