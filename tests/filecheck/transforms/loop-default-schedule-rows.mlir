// RUN: ziggurat-opt %s -p 'convert-graph-to-te,convert-te-to-loop,loop-default-schedule' | filecheck %s
// RUN: ziggurat-opt %s -p 'convert-graph-to-te,convert-te-to-loop,loop-default-schedule{fuse-rows=false}' | filecheck %s --check-prefix=APART
// RUN: ziggurat-opt %s -p 'convert-graph-to-te,convert-te-to-loop,loop-default-schedule,loop-vectorize-innermost,convert-loop-to-hw' | filecheck %s --check-prefix=HW

// A softmax over rows of 2048 (1 MB): its four stages (row max, exp, row sum, scale) run under one
// row loop (transforms/schedule/fuse_rows.py), and its local buffers shrink to one row, allocated
// inside that loop.
// CHECK-LABEL: func.func @softmax_0
// CHECK:       loop.for %[[I:.*]] = 0 to 128 serial {
// CHECK-NEXT:    %{{.*}} = loop.alloc "local" : memref<1x1xf32>
// CHECK-NEXT:    %{{.*}} = loop.alloc "local" : memref<1x2048xf32>
// CHECK-NEXT:    %{{.*}} = loop.alloc "local" : memref<1x1xf32>
// CHECK:         loop.block "softmax_max_init"
// CHECK:         loop.block "softmax_max"
// CHECK:         loop.block "softmax_exp"
// CHECK:         loop.block "softmax_sum_init"
// CHECK:         loop.block "softmax_sum"
// CHECK:         loop.block "softmax" [S %{{.*}} = %[[I]],
// CHECK-NOT:   loop.for %{{.*}} = 0 to 128
// CHECK:       func.return

// fuse-rows=false: four nests over the whole tensor (the reductions in blocks of 4 rows), through 1 MB
// of exp values.
// APART-LABEL: func.func @softmax_0
// APART:       loop.for %{{.*}} = 0 to 128 step 4 serial {
// APART:       loop.alloc "local" : memref<128x2048xf32>
// APART-NEXT:  loop.for %{{.*}} = 0 to 128 serial {
// APART:       loop.for %{{.*}} = 0 to 128 step 4 serial {
// APART:       loop.for %{{.*}} = 0 to 128 serial {

// The row reductions over 2048 lanes keep 4 partial vectors (one dependency chain each), combined after
// the loop: the row max, then the row sum.
// HW-LABEL:   func.func @softmax_0
// HW:         loop.alloc "local" : memref<64xf32>
// HW:         loop.for %{{.*}} = 0 to 2048 step 64 serial {
// HW-COUNT-4:   arith.maximumf %{{.*}}, %{{.*}} : vector<16xf32>
// HW:         } {hw.vector_width = 16 : i64}
// HW-COUNT-3: arith.maximumf %{{.*}}, %{{.*}} : vector<16xf32>
// HW:         hw.vreduce "max"
// HW:         loop.for %{{.*}} = 0 to 2048 step 64 serial {
// HW-COUNT-4:   arith.addf %{{.*}}, %{{.*}} : vector<16xf32>

func.func @main(%x: tensor<128x2048xf32>) -> tensor<128x2048xf32> {
  %y = graph.softmax %x {axis = 1 : i64} : tensor<128x2048xf32>
  func.return %y : tensor<128x2048xf32>
}
