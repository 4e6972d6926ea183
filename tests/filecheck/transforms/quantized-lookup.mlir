// RUN: python -c "import numpy as np; np.savez('%t.npz', s=np.float32(0.05), z=np.float32(128), lo=np.float32(0), hi=np.float32(255), zero=np.float32(0), s2=np.float32(0.03), v=np.ones(4, np.float32), g=np.arange(1, 5, dtype=np.float32).reshape(4, 1, 1))"
// RUN: sed 's#WEIGHTS#%t.npz#' %s | ziggurat-opt -p 'quantized-lookup{per-channel=false}' --split-input-file | filecheck %s
// RUN: sed 's#WEIGHTS#%t.npz#' %s | ziggurat-opt -p 'quantized-lookup{min-cost=100}' --split-input-file | filecheck %s --check-prefix=COSTLY
// RUN: sed 's#WEIGHTS#%t.npz#' %s | ziggurat-opt -p quantized-lookup --split-input-file | filecheck %s --check-prefix=PC

// A quantize step (round, zero point, clamp, NaN guard) makes %q a root of 256 values; the
// dequantize, sigmoid and requantize after it become one table of 256 entries. The lookup
// reads %b2, before the clamp and the guard: its own index clamp picks the same entries.
// CHECK-LABEL: func.func @silu
// CHECK:       %b2 = graph.add %b, %z
// CHECK-NOT:   graph.max
// CHECK-NOT:   graph.where
// CHECK:       %{{.*}} = graph.constant "lookup.r" : tensor<256xf32>
// CHECK-NEXT:  %r = graph.lookup %b2, %{{.*}} {offset = 0 : i64} : tensor<1x4x8x8xf32>, tensor<256xf32> -> tensor<1x4x8x8xf32>
// CHECK-NEXT:  func.return %r
// COSTLY-LABEL: func.func @silu
// COSTLY-NOT:  graph.lookup
// COSTLY:      graph.sigmoid
builtin.module attributes {graph.weights_file = "WEIGHTS"} {
  func.func @silu(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> {
    %s = graph.constant "s" : tensor<f32>
    %z = graph.constant "z" : tensor<f32>
    %lo = graph.constant "lo" : tensor<f32>
    %hi = graph.constant "hi" : tensor<f32>
    %zero = graph.constant "zero" : tensor<f32>
    %s2 = graph.constant "s2" : tensor<f32>
    %a = graph.div %x, %s : tensor<1x4x8x8xf32>, tensor<f32> -> tensor<1x4x8x8xf32>
    %b = graph.round %a : tensor<1x4x8x8xf32>
    %b2 = graph.add %b, %z : tensor<1x4x8x8xf32>, tensor<f32> -> tensor<1x4x8x8xf32>
    %b3 = graph.max %b2, %lo : tensor<1x4x8x8xf32>, tensor<f32> -> tensor<1x4x8x8xf32>
    %c = graph.min %b3, %hi : tensor<1x4x8x8xf32>, tensor<f32> -> tensor<1x4x8x8xf32>
    %m = graph.compare %c, %c {kind = "eq"} : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
    %q = graph.where %m, %c, %zero : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>, tensor<f32> -> tensor<1x4x8x8xf32>
    %d0 = graph.sub %q, %z : tensor<1x4x8x8xf32>, tensor<f32> -> tensor<1x4x8x8xf32>
    %d = graph.mul %d0, %s : tensor<1x4x8x8xf32>, tensor<f32> -> tensor<1x4x8x8xf32>
    %g = graph.sigmoid %d : tensor<1x4x8x8xf32>
    %y = graph.mul %d, %g : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
    %y2 = graph.div %y, %s2 : tensor<1x4x8x8xf32>, tensor<f32> -> tensor<1x4x8x8xf32>
    %r = graph.round %y2 : tensor<1x4x8x8xf32>
    func.return %r : tensor<1x4x8x8xf32>
  }
}

// -----

// No root: %x may hold any float, and a per-channel operand (%v) ends a chain. A uint8
// input is a root; its plain dequantize (cost 2) stays arithmetic.
// CHECK-LABEL: func.func @no_root
// CHECK-NOT:   graph.lookup
// CHECK:       func.return
builtin.module attributes {graph.weights_file = "WEIGHTS"} {
  func.func @no_root(%x: tensor<1x4xf32>, %u: tensor<1x4xui8>) -> (tensor<1x4xf32>, tensor<1x4xf32>) {
    %s = graph.constant "s" : tensor<f32>
    %v = graph.constant "v" : tensor<4xf32>
    %a = graph.sigmoid %x : tensor<1x4xf32>
    %b = graph.div %a, %s : tensor<1x4xf32>, tensor<f32> -> tensor<1x4xf32>
    %c = graph.cast %u : tensor<1x4xui8> -> tensor<1x4xf32>
    %d = graph.mul %c, %s : tensor<1x4xf32>, tensor<f32> -> tensor<1x4xf32>
    %e = graph.add %d, %v : tensor<1x4xf32>, tensor<4xf32> -> tensor<1x4xf32>
    %f = graph.exp %e : tensor<1x4xf32>
    func.return %b, %f : tensor<1x4xf32>, tensor<1x4xf32>
  }
}

// -----

// A per-channel constant (%g, along dim 1) ends a chain with `per-channel=false`; by default the chain's
// table is one per channel, [4, 256], selected by result dim 1.
// CHECK-LABEL: func.func @channels
// CHECK-NOT:   graph.lookup
// CHECK:       func.return
// PC-LABEL:    func.func @channels
// PC:          %{{.*}} = graph.constant "lookup.r" : tensor<4x256xf32>
// PC-NEXT:     %r = graph.lookup %u, %{{.*}} {offset = 0 : i64, dims = array<i64: 1>} : tensor<1x4x2x2xui8>, tensor<4x256xf32> -> tensor<1x4x2x2xf32>
// PC-NEXT:     func.return %r
builtin.module attributes {graph.weights_file = "WEIGHTS"} {
  func.func @channels(%u: tensor<1x4x2x2xui8>) -> tensor<1x4x2x2xf32> {
    %s = graph.constant "s" : tensor<f32>
    %g = graph.constant "g" : tensor<4x1x1xf32>
    %c = graph.cast %u : tensor<1x4x2x2xui8> -> tensor<1x4x2x2xf32>
    %d = graph.mul %c, %s : tensor<1x4x2x2xf32>, tensor<f32> -> tensor<1x4x2x2xf32>
    %e = graph.mul %d, %g : tensor<1x4x2x2xf32>, tensor<4x1x1xf32> -> tensor<1x4x2x2xf32>
    %f = graph.sigmoid %e : tensor<1x4x2x2xf32>
    %r = graph.round %f : tensor<1x4x2x2xf32>
    func.return %r : tensor<1x4x2x2xf32>
  }
}

// -----

// Two values of one chain read outside it, the second computed from the first: each gets its
// own table (both computed before either replaces its value).
// CHECK-LABEL: func.func @nested
// CHECK:       %{{.*}} = graph.constant "lookup.y" : tensor<256xf32>
// CHECK-NEXT:  %y = graph.lookup %u, %{{.*}} {offset = 0 : i64}
// CHECK:       %{{.*}} = graph.constant "lookup.z" : tensor<256xf32>
// CHECK-NEXT:  %z = graph.lookup %u, %{{.*}} {offset = 0 : i64}
// CHECK-NEXT:  func.return %y, %z
builtin.module attributes {graph.weights_file = "WEIGHTS"} {
  func.func @nested(%u: tensor<1x4xui8>) -> (tensor<1x4xf32>, tensor<1x4xf32>) {
    %s = graph.constant "s" : tensor<f32>
    %c = graph.cast %u : tensor<1x4xui8> -> tensor<1x4xf32>
    %d = graph.mul %c, %s : tensor<1x4xf32>, tensor<f32> -> tensor<1x4xf32>
    %g = graph.sigmoid %d : tensor<1x4xf32>
    %y = graph.round %g : tensor<1x4xf32>
    %e = graph.exp %y : tensor<1x4xf32>
    %z = graph.round %e : tensor<1x4xf32>
    func.return %y, %z : tensor<1x4xf32>, tensor<1x4xf32>
  }
}
