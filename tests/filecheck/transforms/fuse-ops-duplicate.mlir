// RUN: ziggurat-opt %s -p 'fuse-ops{cost-guided=true peak-gflops=100 bandwidth-gbs=20 vector-width=16}' | filecheck %s
// RUN: ziggurat-opt %s -p 'fuse-ops{cost-guided=false peak-gflops=100 bandwidth-gbs=20}' | filecheck %s --check-prefix=RULES

// The fused QKV projection of an attention layer split into heads (as the
// PyTorch export of nn.MultiheadAttention spells it): a reshape-transpose of
// the projection read by three slices. The rules materialize the transposed
// tensor (its kernel gathers through divisions by 3 and 384: the oracle
// prices those lanes as scalar) and then cut three slices from it: 4 kernels.
// Cost-guided, each slice recomputes only its part of the layout change: 3
// kernels, each recording the decision with both costs.
// RULES-LABEL: func.func @qkv_split
// RULES:      %t = graph.fused (%a)
// RULES:      %q = graph.fused (%t)
// RULES:      %k = graph.fused (%t)
// RULES:      %v = graph.fused (%t)
// RULES-NOT:  graph.fusion_decision
// CHECK-LABEL: func.func @qkv_split
// CHECK-NEXT: %q = graph.fused (%a) {graph.fusion_decision = "duplicated: 4 groups -> 3, cost [[BEFORE:[0-9.]+]]us -> [[AFTER:[0-9.]+]]us"}
// CHECK-NEXT: ^
// CHECK-NEXT:   %r = graph.reshape
// CHECK-NEXT:   %t = graph.transpose %r
// CHECK-NEXT:   %q0 = graph.slice %t
// CHECK:      %k = graph.fused (%a) {graph.fusion_decision = "duplicated: 4 groups -> 3, cost [[BEFORE]]us -> [[AFTER]]us"}
// CHECK-NEXT: ^
// CHECK-NEXT:   %r_1 = graph.reshape
// CHECK-NEXT:   %t_1 = graph.transpose %r_1
// CHECK-NEXT:   %k0 = graph.slice %t_1
// CHECK:      %v = graph.fused (%a) {graph.fusion_decision = "duplicated: 4 groups -> 3
// CHECK:        %v0 = graph.slice
// CHECK:      func.return %q, %k, %v
func.func @qkv_split(%a: tensor<32x384xf32>) -> (tensor<4x32x32xf32>, tensor<4x32x32xf32>, tensor<4x32x32xf32>) {
  %r = graph.reshape %a : tensor<32x384xf32> -> tensor<32x3x128xf32>
  %t = graph.transpose %r {perm = array<i64: 1, 0, 2>} : tensor<32x3x128xf32> -> tensor<3x32x128xf32>
  %q0 = graph.slice %t {starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : tensor<3x32x128xf32> -> tensor<1x32x128xf32>
  %k0 = graph.slice %t {starts = array<i64: 1, 0, 0>, steps = array<i64: 1, 1, 1>} : tensor<3x32x128xf32> -> tensor<1x32x128xf32>
  %v0 = graph.slice %t {starts = array<i64: 2, 0, 0>, steps = array<i64: 1, 1, 1>} : tensor<3x32x128xf32> -> tensor<1x32x128xf32>
  %q1 = graph.reshape %q0 : tensor<1x32x128xf32> -> tensor<32x4x32xf32>
  %k1 = graph.reshape %k0 : tensor<1x32x128xf32> -> tensor<32x4x32xf32>
  %v1 = graph.reshape %v0 : tensor<1x32x128xf32> -> tensor<32x4x32xf32>
  %q = graph.transpose %q1 {perm = array<i64: 1, 0, 2>} : tensor<32x4x32xf32> -> tensor<4x32x32xf32>
  %k = graph.transpose %k1 {perm = array<i64: 1, 0, 2>} : tensor<32x4x32xf32> -> tensor<4x32x32xf32>
  %v = graph.transpose %v1 {perm = array<i64: 1, 0, 2>} : tensor<32x4x32xf32> -> tensor<4x32x32xf32>
  func.return %q, %k, %v : tensor<4x32x32xf32>, tensor<4x32x32xf32>, tensor<4x32x32xf32>
}

// Negative: a producer that two broadcasts read 1024 times per element. A
// copy inside each consumer would evaluate exp and tanh for every one of
// the 65536 output elements instead of once per row: the oracle keeps it
// materialized, and nothing is recorded.
// CHECK-LABEL: func.func @broadcast_consumers
// CHECK-NOT:  graph.fusion_decision
// CHECK:      %t = graph.fused (%x)
// CHECK:      %a = graph.fused (%t)
// CHECK:      %b = graph.fused (%t)
// CHECK-NOT:  graph.exp
// CHECK:      func.return %a, %b
// RULES-LABEL: func.func @broadcast_consumers
// RULES:      %t = graph.fused (%x)
// RULES:      %a = graph.fused (%t)
// RULES:      %b = graph.fused (%t)
func.func @broadcast_consumers(%x: tensor<64x1xf32>) -> (tensor<64x1024xf32>, tensor<64x1024xf32>) {
  %e = graph.exp %x : tensor<64x1xf32>
  %t = graph.tanh %e : tensor<64x1xf32>
  %ba = graph.broadcast_to %t : tensor<64x1xf32> -> tensor<64x1024xf32>
  %a = graph.relu %ba : tensor<64x1024xf32>
  %bb = graph.broadcast_to %t : tensor<64x1xf32> -> tensor<64x1024xf32>
  %b = graph.neg %bb : tensor<64x1024xf32>
  func.return %a, %b : tensor<64x1024xf32>, tensor<64x1024xf32>
}
