// RUN: ziggurat-opt %s -p 'fuse-ops,annotate-costs{peak-gflops=100 bandwidth-gbs=20}' | filecheck %s
// RUN: ziggurat-opt %s -p 'fuse-ops,annotate-costs{peak-gflops=100 bandwidth-gbs=20}' | ziggurat-opt | filecheck %s

// Roofline with fixed peaks (100 GFLOP/s, 20 GB/s): the relu is bound by its
// 32 KiB of traffic (4096 flops / 100 GFLOP/s = 0.04 us < 32768 B / 20 GB/s = 1.64 us).
// CHECK-LABEL: func.func @elementwise
// CHECK: %y = graph.relu %x {graph.cost = #graph.cost<time_us = 1.6384, flops = 4096, bytes = 32768, source = "roofline">} : tensor<4096xf32>
func.func @elementwise(%x: tensor<4096xf32>) -> tensor<4096xf32> {
  %y = graph.relu %x : tensor<4096xf32>
  func.return %y : tensor<4096xf32>
}

// A matmul is bound by its flops (2*64*256*64); a fused group gets one cost for
// its whole kernel and its inner ops get none.
// CHECK-LABEL: func.func @matmul_and_group
// CHECK:      %m = graph.matmul %a, %w {graph.cost = #graph.cost<time_us = 27.5251, flops = 2097152, bytes = 200576, source = "roofline">}
// CHECK:      %r = graph.fused (%m, %b) {graph.cost = #graph.cost<time_us = {{[0-9.]+}}, flops = 8192, bytes = 33024, source = "roofline">}
// CHECK-NEXT: ^{{.*}}
// CHECK-NEXT:   graph.add %{{.*}} : tensor<64x64xf32>, tensor<64xf32> -> tensor<64x64xf32>{{$}}
// CHECK-NEXT:   graph.relu %{{.*}} : tensor<64x64xf32>{{$}}
func.func @matmul_and_group(%a: tensor<64x256xf32>, %w: tensor<256x64xf32>, %b: tensor<64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
  %m = graph.matmul %a, %w : tensor<64x256xf32>, tensor<256x64xf32> -> tensor<64x64xf32>
  %s = graph.add %m, %b : tensor<64x64xf32>, tensor<64xf32> -> tensor<64x64xf32>
  %r = graph.relu %s : tensor<64x64xf32>
  func.return %m, %r : tensor<64x64xf32>, tensor<64x64xf32>
}

// Negative: constants and calls are no kernels of their own and get no cost.
// CHECK-LABEL: func.func @no_kernel
// CHECK-NEXT: %w = graph.constant "w" : tensor<4xf32>
// CHECK-NEXT: func.return %w : tensor<4xf32>
func.func @no_kernel() -> tensor<4xf32> {
  %w = graph.constant "w" : tensor<4xf32>
  func.return %w : tensor<4xf32>
}
