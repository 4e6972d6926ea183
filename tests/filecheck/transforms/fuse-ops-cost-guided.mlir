// RUN: ziggurat-opt %s -p 'fuse-ops{cost-guided=true peak-gflops=100 bandwidth-gbs=20 vector-width=16}' | filecheck %s
// RUN: ziggurat-opt %s -p 'fuse-ops{cost-guided=false peak-gflops=100 bandwidth-gbs=20}' | filecheck %s --check-prefix=RULES
// RUN: ziggurat-opt %s -p 'fuse-ops' | filecheck %s --check-prefix=RULES

// Softmax spelled out: the rules keep four kernels (max | sub+exp | sum | div:
// a reduction takes no consumers). The roofline says one kernel reading x
// once is cheaper, so cost-guided fusion merges the chain and records why.
// RULES-LABEL: func.func @softmax
// RULES:      %m = graph.reduce %x
// RULES-NEXT: %e = graph.fused (%x, %m)
// RULES:      %s = graph.reduce %e
// RULES-NEXT: %y = graph.div %e, %s
// RULES-NOT:  graph.fusion_decision
// CHECK-LABEL: func.func @softmax
// CHECK-NEXT: %y = graph.fused (%x) {graph.fusion_decision = "merged: 4 groups -> 1, cost 19.40us -> 9.86us"} : (tensor<64x256xf32>) -> tensor<64x256xf32> {
// CHECK-NEXT: ^{{.*}}(%[[X:.*]]: tensor<64x256xf32>):
// CHECK-NEXT:   %m = graph.reduce %[[X]] {kind = "max"
// CHECK-NEXT:   %d = graph.sub %[[X]], %m
// CHECK-NEXT:   %e = graph.exp %d
// CHECK-NEXT:   %s = graph.reduce %e {kind = "sum"
// CHECK-NEXT:   %[[Y:.*]] = graph.div %e, %s
// CHECK-NEXT:   graph.yield %[[Y]]
// CHECK-NEXT: }
// CHECK-NEXT: func.return %y
func.func @softmax(%x: tensor<64x256xf32>) -> tensor<64x256xf32> {
  %m = graph.reduce %x {kind = "max", axes = array<i64: 1>, keepdims = true} : tensor<64x256xf32> -> tensor<64x1xf32>
  %d = graph.sub %x, %m : tensor<64x256xf32>, tensor<64x1xf32> -> tensor<64x256xf32>
  %e = graph.exp %d : tensor<64x256xf32>
  %s = graph.reduce %e {kind = "sum", axes = array<i64: 1>, keepdims = true} : tensor<64x256xf32> -> tensor<64x1xf32>
  %y = graph.div %e, %s : tensor<64x256xf32>, tensor<64x1xf32> -> tensor<64x256xf32>
  func.return %y : tensor<64x256xf32>
}

// Layer norm as the ONNX frontend decomposes it (mean, centre, variance,
// sqrt, normalize, scale): three kernels by the rules, one cost-guided.
// RULES-LABEL: func.func @layer_norm
// RULES:      %mu = graph.reduce %x
// RULES-NEXT: %c = graph.sub %x, %mu
// RULES-NEXT: %var = graph.fused (%c)
// RULES:      %y = graph.fused (%var, %eps, %c, %g)
// CHECK-LABEL: func.func @layer_norm
// CHECK:      %y = graph.fused (%x, %eps, %g) {graph.fusion_decision = "merged: 4 groups -> 1, cost {{.*}}"}
// CHECK-NEXT: ^
// CHECK-NEXT:   %mu = graph.reduce
// CHECK-NEXT:   %c = graph.sub
// CHECK-NEXT:   %sq = graph.mul
// CHECK-NEXT:   %var = graph.reduce
// CHECK-NEXT:   %ve = graph.add
// CHECK-NEXT:   %sd = graph.sqrt
// CHECK-NEXT:   %n = graph.div
// CHECK-NEXT:   %{{.*}} = graph.mul
// CHECK-NEXT:   graph.yield
// CHECK-NEXT: }
// CHECK-NEXT: func.return %y
func.func @layer_norm(%x: tensor<8x128xf32>) -> tensor<8x128xf32> {
  %eps = graph.constant "eps" : tensor<1xf32>
  %g = graph.constant "gamma" : tensor<128xf32>
  %mu = graph.reduce %x {kind = "mean", axes = array<i64: 1>, keepdims = true} : tensor<8x128xf32> -> tensor<8x1xf32>
  %c = graph.sub %x, %mu : tensor<8x128xf32>, tensor<8x1xf32> -> tensor<8x128xf32>
  %sq = graph.mul %c, %c : tensor<8x128xf32>, tensor<8x128xf32> -> tensor<8x128xf32>
  %var = graph.reduce %sq {kind = "mean", axes = array<i64: 1>, keepdims = true} : tensor<8x128xf32> -> tensor<8x1xf32>
  %ve = graph.add %var, %eps : tensor<8x1xf32>, tensor<1xf32> -> tensor<8x1xf32>
  %sd = graph.sqrt %ve : tensor<8x1xf32>
  %n = graph.div %c, %sd : tensor<8x128xf32>, tensor<8x1xf32> -> tensor<8x128xf32>
  %y = graph.mul %n, %g : tensor<8x128xf32>, tensor<128xf32> -> tensor<8x128xf32>
  func.return %y : tensor<8x128xf32>
}

// A group the rules make, whose fused kernel recomputes exp and tanh for
// every element of the broadcast (64 -> 65536 evaluations): cheaper split in
// two kernels; both parts record the decision.
// RULES-LABEL: func.func @recompute
// RULES:      %t = graph.fused (%x)
// RULES-NEXT: ^
// RULES-NEXT:   graph.exp
// RULES-NEXT:   graph.tanh
// RULES-NEXT:   graph.broadcast_to
// RULES-NEXT:   graph.tanh
// CHECK-LABEL: func.func @recompute
// CHECK-NEXT: %b = graph.fused (%x) {graph.fusion_decision = "split: 1 group -> 2, cost 21.63us -> 13.23us"} : (tensor<64x1xf32>) -> tensor<64x1xf32> {
// CHECK-NEXT: ^
// CHECK-NEXT:   %a = graph.exp
// CHECK-NEXT:   %{{.*}} = graph.tanh %a
// CHECK-NEXT:   graph.yield
// CHECK-NEXT: }
// CHECK-NEXT: %t = graph.fused (%b) {graph.fusion_decision = "split: 1 group -> 2, cost 21.63us -> 13.23us"} : (tensor<64x1xf32>) -> tensor<64x1024xf32> {
// CHECK-NEXT: ^
// CHECK-NEXT:   %c = graph.broadcast_to
// CHECK-NEXT:   %{{.*}} = graph.tanh %c
func.func @recompute(%x: tensor<64x1xf32>) -> tensor<64x1024xf32> {
  %a = graph.exp %x : tensor<64x1xf32>
  %b = graph.tanh %a : tensor<64x1xf32>
  %c = graph.broadcast_to %b : tensor<64x1xf32> -> tensor<64x1024xf32>
  %t = graph.tanh %c : tensor<64x1024xf32>
  func.return %t : tensor<64x1024xf32>
}

// Negative: the rule-made matmul+relu group is already the cheapest choice
// (splitting the relu off writes and reads the product again), and two
// matmuls never share a kernel: nothing changes, no decision is recorded.
// CHECK-LABEL: func.func @unchanged
// CHECK-NOT:  graph.fusion_decision
// CHECK:      %r = graph.fused (%x, %v)
// CHECK:        graph.matmul
// CHECK-NEXT:   graph.relu
// CHECK-NEXT:   graph.yield
// CHECK-NEXT: }
// CHECK-NEXT: %m2 = graph.matmul %r, %u
// CHECK-NEXT: func.return %m2
// RULES-LABEL: func.func @unchanged
// RULES:      %r = graph.fused (%x, %v)
// RULES:      %m2 = graph.matmul %r, %u
func.func @unchanged(%x: tensor<32x64xf32>, %v: tensor<64x64xf32>, %u: tensor<64x64xf32>) -> tensor<32x64xf32> {
  %m1 = graph.matmul %x, %v : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %r = graph.relu %m1 : tensor<32x64xf32>
  %m2 = graph.matmul %r, %u : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  func.return %m2 : tensor<32x64xf32>
}
