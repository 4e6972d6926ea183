// RUN: ziggurat-opt %s -p convert-te-to-loop --split-input-file | filecheck %s

// A reduction: spatial loops, an init block, then the reduction loop around
// an update block; the model function calls kernels on buffers.
func.func @main(%x: tensor<2x3xf32>) -> tensor<2x1xf32> {
  %w = graph.constant "w" : tensor<2x3xf32>
  %m = graph.call_kernel @sum_0(%x) : (tensor<2x3xf32>) -> tensor<2x1xf32>
  func.return %m : tensor<2x1xf32>
}
func.func @sum_0(%in0: tensor<2x3xf32>) -> tensor<2x1xf32> {
  %s = te.reduce "sum" add init 0.000000e+00 : f32 (%i, %j) reduce (%k : 3) : tensor<2x1xf32> {
    %v = te.read %in0[%i, %k] : tensor<2x3xf32>
    te.yield %v : f32
  }
  func.return %s : tensor<2x1xf32>
}
// CHECK-LABEL: func.func @main(%x: memref<2x3xf32>, %{{.*}}: memref<2x1xf32>) {
// CHECK-NEXT:    %{{.*}} = loop.const_buffer "w" : memref<2x3xf32>
// CHECK-NEXT:    func.call @sum_0(%x, %[[OUT:.*]]) : (memref<2x3xf32>, memref<2x1xf32>) -> ()
// CHECK-NEXT:    func.return
// CHECK-LABEL: func.func @sum_0(%in0: memref<2x3xf32>, %out0: memref<2x1xf32>) {
// CHECK-NEXT:    loop.for %i0 = 0 to 2 serial {
// CHECK-NEXT:      loop.for %i1 = 0 to 1 serial {
// CHECK-NEXT:        loop.block "sum_init" [S %[[A:.*]] = %i0, S %[[B:.*]] = %i1] {
// CHECK-NEXT:          %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:          loop.store %[[Z]], %out0[%[[A]], %[[B]]] : memref<2x1xf32>
// CHECK-NEXT:        }
// CHECK-NEXT:        loop.for %r0 = 0 to 3 serial {
// CHECK-NEXT:          loop.block "sum" [S %[[I:.*]] = %i0, S %[[J:.*]] = %i1, R %[[K:.*]] = %r0] {
// CHECK-NEXT:            %[[V:.*]] = loop.load %in0[%[[I]], %[[K]]] : memref<2x3xf32>
// CHECK-NEXT:            %[[ACC:.*]] = loop.load %out0[%[[I]], %[[J]]] : memref<2x1xf32>
// CHECK-NEXT:            %[[S:.*]] = arith.addf %[[ACC]], %[[V]] : f32
// CHECK-NEXT:            loop.store %[[S]], %out0[%[[I]], %[[J]]] : memref<2x1xf32>

// -----

// Intermediates get local buffers; a padded read clamps and selects.
func.func @pad_then_scale(%in0: tensor<4xf32>) -> tensor<6xf32> {
  %p = te.compute "pad" (%i) : tensor<6xf32> {
    %m1 = arith.constant -1 : index
    %j = arith.addi %i, %m1 : index
    %v = te.read %in0[%j] pad 0.000000e+00 : f32 : tensor<4xf32>
    te.yield %v : f32
  }
  %s = te.compute "scale" (%i) : tensor<6xf32> {
    %v = te.read %p[%i] : tensor<6xf32>
    %two = arith.constant 2.000000e+00 : f32
    %r = arith.mulf %v, %two : f32
    te.yield %r : f32
  }
  func.return %s : tensor<6xf32>
}
// CHECK-LABEL: func.func @pad_then_scale(%in0: memref<4xf32>, %out0: memref<6xf32>) {
// CHECK-NEXT:    %[[T:.*]] = loop.alloc "local" : memref<6xf32>
// CHECK:         loop.block "pad"
// CHECK:           %[[LO:.*]] = arith.cmpi sge
// CHECK:           %[[HI:.*]] = arith.cmpi slt
// CHECK:           %[[OK:.*]] = arith.andi %[[LO]], %[[HI]] : i1
// CHECK:           %[[SAFE:.*]] = arith.select %[[OK]]
// CHECK-NEXT:      %[[V:.*]] = loop.load %in0[%[[SAFE]]] : memref<4xf32>
// CHECK-NEXT:      %[[PAD:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[R:.*]] = arith.select %[[OK]], %[[V]], %[[PAD]] : f32
// CHECK-NEXT:      loop.store %[[R]], %[[T]][%{{.*}}] : memref<6xf32>
// CHECK:         loop.block "scale"
// CHECK:           loop.load %[[T]]
// CHECK:           loop.store %{{.*}}, %out0

// -----

// Negative: a function with neither te nor graph ops is unchanged.
func.func @plain(%a: f32) -> f32 {
  func.return %a : f32
}
// CHECK-LABEL: func.func @plain(%a: f32) -> f32 {
// CHECK-NEXT:    func.return %a : f32

// -----

// A padded read of a bare variable that runs past the dimension keeps its guard.
func.func @longer_than_input(%a: tensor<2xf32>) -> tensor<3xf32> {
  %0 = te.compute "c" (%i) : tensor<3xf32> {
    %v = te.read %a[%i] pad 0.000000e+00 : f32 : tensor<2xf32>
    te.yield %v : f32
  }
  func.return %0 : tensor<3xf32>
}
// CHECK-LABEL: func.func @longer_than_input
// CHECK:         %[[OK:.*]] = arith.andi
// CHECK:         %[[SAFE:.*]] = arith.select %[[OK]]
// CHECK-NEXT:    loop.load %in0[%[[SAFE]]] : memref<2xf32>
