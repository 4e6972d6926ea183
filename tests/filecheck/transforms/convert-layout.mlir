// RUN: ziggurat-opt %s -p 'convert-layout{block=16}' --split-input-file | filecheck %s
// RUN: ziggurat-opt %s -p 'convert-layout{block=16 cost-guided=true peak-gflops=100 bandwidth-gbs=20}' --split-input-file | filecheck %s --check-prefix=ROOF

// A conv chain (bias from a folded BatchNorm, ReLU, a second conv, a residual
// add, a max pool) becomes ONE blocked region: transforms only where %x enters
// and where the pooled result leaves for the function's return. The weight
// transform is shared by both convs.
// CHECK-LABEL: func.func @chain
// CHECK:      %[[X:.*]] = graph.layout_transform %x {src = "NCHW", dst = "NCHW16c"} : tensor<1x32x8x8xf32> -> tensor<1x2x8x8x16xf32>
// CHECK-NEXT: %[[W:.*]] = graph.layout_transform %w {src = "OIHW", dst = "OIHW16i16o"} : tensor<32x32x3x3xf32> -> tensor<2x2x3x3x16x16xf32>
// CHECK-NEXT: %c = graph.conv2d_nchwc %[[X]], %[[W]] {{.*}} : tensor<1x2x8x8x16xf32>, tensor<2x2x3x3x16x16xf32> -> tensor<1x2x8x8x16xf32>
// CHECK:      %a = graph.add %c, %{{.*}} : tensor<1x2x8x8x16xf32>, tensor<1x2x1x1x16xf32> -> tensor<1x2x8x8x16xf32>
// CHECK-NEXT: %r = graph.relu %a : tensor<1x2x8x8x16xf32>
// CHECK-NEXT: %c2 = graph.conv2d_nchwc %r, %[[W]]
// CHECK-NEXT: %s = graph.add %c2, %[[X]] : tensor<1x2x8x8x16xf32>, tensor<1x2x8x8x16xf32> -> tensor<1x2x8x8x16xf32>
// CHECK-NEXT: %p = graph.max_pool2d_nchwc %s {{.*}} : tensor<1x2x8x8x16xf32> -> tensor<1x2x4x4x16xf32>
// CHECK-NEXT: %[[OUT:.*]] = graph.layout_transform %p {src = "NCHW16c", dst = "NCHW"} : tensor<1x2x4x4x16xf32> -> tensor<1x32x4x4xf32>
// CHECK-NEXT: func.return %[[OUT]]
// CHECK-NOT:  graph.layout_transform
// The roofline sees the same flops and bytes in both layouts plus the boundary
// transforms, so cost-guided mode keeps NCHW and says why.
// ROOF-LABEL: func.func @chain
// ROOF-NOT:   graph.layout_transform
// ROOF:       %c = graph.conv2d %x, %w {graph.layout_decision = "kept NCHW: 2 convs, 6 ops, cost NCHW {{[0-9.]+}}us, blocked {{[0-9.]+}}us"
// ROOF-NOT:   nchwc
func.func @chain(%x: tensor<1x32x8x8xf32>) -> tensor<1x32x4x4xf32> {
  %w = graph.constant "w" : tensor<32x32x3x3xf32>
  %bias = graph.constant "b" : tensor<32x1x1xf32>
  %c = graph.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x32x8x8xf32>, tensor<32x32x3x3xf32> -> tensor<1x32x8x8xf32>
  %a = graph.add %c, %bias : tensor<1x32x8x8xf32>, tensor<32x1x1xf32> -> tensor<1x32x8x8xf32>
  %r = graph.relu %a : tensor<1x32x8x8xf32>
  %c2 = graph.conv2d %r, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x32x8x8xf32>, tensor<32x32x3x3xf32> -> tensor<1x32x8x8xf32>
  %s = graph.add %c2, %x : tensor<1x32x8x8xf32>, tensor<1x32x8x8xf32> -> tensor<1x32x8x8xf32>
  %p = graph.max_pool2d %s {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<1x32x8x8xf32> -> tensor<1x32x4x4xf32>
  func.return %p : tensor<1x32x4x4xf32>
}

// -----

// A first layer (C_in = 3) blocks its input by 3; a region value that two ops
// outside the region read (two reshapes) gets ONE transform back.
// The conv is the only reader of %x, so the transform into the region also
// pads it (10x10) and the blocked conv has no padding of its own (in @chain
// the residual add reads %x too: its transform stays unpadded).
// CHECK-LABEL: func.func @stem
// CHECK:      %[[XP:.*]] = graph.layout_transform %x {src = "NCHW", dst = "NCHW3c", pads = array<i64: 1, 1, 1, 1>} : tensor<1x3x8x8xf32> -> tensor<1x1x10x10x3xf32>
// CHECK:      graph.layout_transform %w {src = "OIHW", dst = "OIHW3i16o"} : tensor<16x3x3x3xf32> -> tensor<1x1x3x3x3x16xf32>
// The roofline keeps this 8x8 stem in NCHW: the NCHW conv reads a zero-padded
// copy too (no per-tap bounds tests at either vector width), and the blocked side
// pays for its two transforms:
// ROOF-LABEL: func.func @stem
// ROOF:       graph.conv2d %x, %w {graph.layout_decision = "kept NCHW: 1 conv, 2 ops, cost NCHW {{[0-9.]+}}us, blocked {{[0-9.]+}}us"
// CHECK:      %c = graph.conv2d_nchwc %[[XP]], %{{.*}} {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<1x1x10x10x3xf32>
// CHECK:      %r = graph.relu %c : tensor<1x1x8x8x16xf32>
// CHECK-NEXT: %[[B:.*]] = graph.layout_transform %r {src = "NCHW16c", dst = "NCHW"}
// CHECK-NEXT: %g = graph.reshape %[[B]]
// CHECK-NEXT: %f = graph.reshape %[[B]]
func.func @stem(%x: tensor<1x3x8x8xf32>) -> (tensor<1x16x64xf32>, tensor<1x1024xf32>) {
  %w = graph.constant "w" : tensor<16x3x3x3xf32>
  %c = graph.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x8x8xf32>, tensor<16x3x3x3xf32> -> tensor<1x16x8x8xf32>
  %r = graph.relu %c : tensor<1x16x8x8xf32>
  %g = graph.reshape %r : tensor<1x16x8x8xf32> -> tensor<1x16x64xf32>
  %f = graph.reshape %r : tensor<1x16x8x8xf32> -> tensor<1x1024xf32>
  func.return %g, %f : tensor<1x16x64xf32>, tensor<1x1024xf32>
}

// -----

// Global pooling of a region value stays in the region: a mean over H and W of
// the blocked tensor; only its 1x1 result goes back to NCHW.
// CHECK-LABEL: func.func @pooled
// CHECK:      %r = graph.relu %c : tensor<1x1x8x8x16xf32>
// CHECK-NEXT: %g = graph.reduce %r {kind = "mean", axes = array<i64: 2, 3>, keepdims = true} : tensor<1x1x8x8x16xf32> -> tensor<1x1x1x1x16xf32>
// CHECK-NEXT: %{{.*}} = graph.layout_transform %g {src = "NCHW16c", dst = "NCHW"} : tensor<1x1x1x1x16xf32> -> tensor<1x16x1x1xf32>
func.func @pooled(%x: tensor<1x3x8x8xf32>) -> tensor<1x16x1x1xf32> {
  %w = graph.constant "w" : tensor<16x3x3x3xf32>
  %c = graph.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x3x8x8xf32>, tensor<16x3x3x3xf32> -> tensor<1x16x8x8xf32>
  %r = graph.relu %c : tensor<1x16x8x8xf32>
  %g = graph.global_avg_pool %r : tensor<1x16x8x8xf32> -> tensor<1x16x1x1xf32>
  func.return %g : tensor<1x16x1x1xf32>
}

// -----

// Must not fire: C_out = 8 is below one block of 16 (padding would waste
// half of it), a grouped conv, and a conv whose weight is not a constant all
// stay NCHW, untouched.
// CHECK-LABEL: func.func @no_fire
// CHECK-NOT:  graph.layout_transform
// CHECK-NOT:  nchwc
// CHECK:      func.return
func.func @no_fire(%x: tensor<1x32x8x8xf32>, %wx: tensor<32x32x3x3xf32>) -> (tensor<1x8x8x8xf32>, tensor<1x32x8x8xf32>, tensor<1x32x8x8xf32>) {
  %w8 = graph.constant "w8" : tensor<8x32x3x3xf32>
  %a = graph.conv2d %x, %w8 {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x32x8x8xf32>, tensor<8x32x3x3xf32> -> tensor<1x8x8x8xf32>
  %wg = graph.constant "wg" : tensor<32x16x3x3xf32>
  %b = graph.conv2d %x, %wg {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 2 : i64} : tensor<1x32x8x8xf32>, tensor<32x16x3x3xf32> -> tensor<1x32x8x8xf32>
  %c = graph.conv2d %x, %wx {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x32x8x8xf32>, tensor<32x32x3x3xf32> -> tensor<1x32x8x8xf32>
  func.return %a, %b, %c : tensor<1x8x8x8xf32>, tensor<1x32x8x8xf32>, tensor<1x32x8x8xf32>
}

// -----

// C_out = 24 is no multiple of 16: the result has two blocks, the last one
// padded (its weights zero beyond 24), and the transform back drops the padding.
// CHECK-LABEL: func.func @ragged
// CHECK:      graph.conv2d_nchwc {{.*}} : tensor<1x2x10x10x16xf32>, tensor<2x2x3x3x16x16xf32> -> tensor<1x2x8x8x16xf32>
// CHECK:      graph.layout_transform %{{.*}} {src = "NCHW16c", dst = "NCHW"} : tensor<1x2x8x8x16xf32> -> tensor<1x24x8x8xf32>
func.func @ragged(%x: tensor<1x32x8x8xf32>) -> tensor<1x24x8x8xf32> {
  %w24 = graph.constant "w24" : tensor<24x32x3x3xf32>
  %a = graph.conv2d %x, %w24 {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x32x8x8xf32>, tensor<24x32x3x3xf32> -> tensor<1x24x8x8xf32>
  func.return %a : tensor<1x24x8x8xf32>
}

// -----

// A depthwise conv (groups = C_in = C_out) is repacked from the weight store
// (its weight becomes [C/16, KH, KW, 16], graph.depthwise_conv2d_nchwc; tests/unit/
// test_convert_layout.py checks that path). Without a store, as in this bare
// text file, it stays NCHW.
// CHECK-LABEL: func.func @depthwise
// CHECK-NOT:  graph.layout_transform
// CHECK-NOT:  nchwc
// CHECK:      func.return
func.func @depthwise(%x: tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32> {
  %w = graph.constant "dw" : tensor<32x1x3x3xf32>
  %a = graph.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 32 : i64} : tensor<1x32x8x8xf32>, tensor<32x1x3x3xf32> -> tensor<1x32x8x8xf32>
  func.return %a : tensor<1x32x8x8xf32>
}
