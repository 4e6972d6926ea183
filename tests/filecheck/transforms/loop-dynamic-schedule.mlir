// RUN: ziggurat-opt %s -p 'convert-te-to-loop,loop-dynamic-schedule' | filecheck %s
// RUN: ziggurat-opt %s -p 'convert-te-to-loop,loop-dynamic-schedule,convert-loop-to-hw' | filecheck %s --check-prefix=HW

// A matmul over `m` rows and `n` columns (an attention product) and its scaling: a register block
// of 6 rows by 4 vectors of columns (24 accumulators in a local [24, 16] buffer), the columns
// left over one vector at a time (the last masked; accumulators of their own), the rows left
// over in blocks of 2, then 1;
// the scaling runs in the store blocks (the product's buffer goes). The parallel loop carries its
// work as an expression of the symbols (`dyn.work`): the backend forks only where it is enough.
func.func @mm(%a: tensor<?x32xf32, #sym.dims<"m">>, %b: tensor<32x?xf32, #sym.dims<"n">>) -> tensor<?x?xf32, #sym.dims<"m", "n">> {
  %y = te.reduce "matmul" add init 0.0 : f32 (%i, %j) reduce (%k : 32) : tensor<?x?xf32, #sym.dims<"m", "n">> {
    %x = te.read %a[%i, %k] : tensor<?x32xf32, #sym.dims<"m">>
    %w = te.read %b[%k, %j] : tensor<32x?xf32, #sym.dims<"n">>
    %p = arith.mulf %x, %w : f32
    te.yield %p : f32
  }
  %z = te.compute "scale" (%i, %j) : tensor<?x?xf32, #sym.dims<"m", "n">> {
    %v = te.read %y[%i, %j] : tensor<?x?xf32, #sym.dims<"m", "n">>
    %c = arith.constant 0.125 : f32
    %s = arith.mulf %v, %c : f32
    te.yield %s : f32
  }
  func.return %z : tensor<?x?xf32, #sym.dims<"m", "n">>
}

// CHECK-LABEL: func.func @mm(
// CHECK-SAME:    loop.scheduled
// CHECK:         loop.for %io = %{{.*}} to %{{.*}} step 6 parallel {
// CHECK-NEXT:      %acc = loop.alloc "local" : memref<24x16xf32>
// CHECK:           %acc_tail = loop.alloc "local" : memref<24x16xf32>
// CHECK:           loop.for %jo = %{{.*}} to %{{.*}} step 64 serial {
// CHECK-NEXT:        loop.for %jl = 0 to 16 vectorized {
// CHECK-COUNT-24:      loop.block "matmul_init"
// CHECK:               loop.for %{{.*}} = 0 to 32 serial {
// CHECK-COUNT-24:        loop.block "matmul" [
// CHECK:               }
// CHECK:             loop.block "matmul_store"
// CHECK:               arith.mulf
// CHECK-NEXT:          loop.store %{{.*}}, %out0
// CHECK:           loop.for %jo_1 = %{{.*}} to %n step 16 serial {
// CHECK:             loop.for %jl_1 = 0 to %{{.*}} vectorized {
// CHECK-COUNT-6:       loop.block "matmul_init"
// CHECK:         } {dyn.blocked = "6x4x16", dyn.work = "29*m*n"}
// CHECK:         loop.for %io_1 = %{{.*}} to %{{.*}} step 2 serial {
// CHECK-NEXT:      %acc_1 = loop.alloc "local" : memref<8x16xf32>
// CHECK:         } {dyn.blocked = "2x4x16", dyn.leftover}
// CHECK:         loop.for %io_2 = %{{.*}} to %m serial {
// CHECK-NEXT:      %acc_2 = loop.alloc "local" : memref<4x16xf32>
// CHECK:         } {dyn.blocked = "1x4x16", dyn.leftover}
// CHECK-NOT:     loop.block "scale"

// The block's column vector: accumulators loaded and stored at [u, lane], B a vector, A broadcast,
// a masked tail where the columns run out.
// HW-LABEL: func.func @mm(
// HW:         hw.vlanecmp "slt"
// HW:         hw.vbroadcast
// HW:         hw.vfma

// A padded 3x3 conv in NCHW16c over run-time `h` and `w` with 4 output channel blocks: the input
// gets a zero-padded copy (`2 + h` by `2 + w`, the halo zeroed, no tests left in the reduction),
// and the register block covers 6 columns of the map by 4 channel blocks (the channel loop steps
// by 4: 24 accumulators), the columns left over in blocks of 2, then 1, with 4 channel blocks too.
func.func @conv(%x: tensor<1x2x?x?x16xf32, #sym.dims<"h", "w">>, %k: tensor<4x2x3x3x16x16xf32>) -> tensor<1x4x?x?x16xf32, #sym.dims<"h", "w">> {
  %y = te.reduce "conv2d_nchwc" add init 0.0 : f32 (%n, %co, %oh, %ow, %cb) reduce (%ci : 2, %kh : 3, %kw : 3, %cc : 16) : tensor<1x4x?x?x16xf32, #sym.dims<"h", "w">> {
    %a = arith.addi %oh, %kh : index
    %m1 = arith.constant -1 : index
    %ih = arith.addi %a, %m1 : index
    %b = arith.addi %ow, %kw : index
    %iw = arith.addi %b, %m1 : index
    %v = te.read %x[%n, %ci, %ih, %iw, %cc] pad 0.0 : f32 : tensor<1x2x?x?x16xf32, #sym.dims<"h", "w">>
    %g = te.read %k[%co, %ci, %kh, %kw, %cc, %cb] : tensor<4x2x3x3x16x16xf32>
    %p = arith.mulf %v, %g : f32
    te.yield %p : f32
  }
  func.return %y : tensor<1x4x?x?x16xf32, #sym.dims<"h", "w">>
}

// CHECK-LABEL: func.func @conv(
// CHECK:         %{{.*}} = loop.alloc "local" : memref<1x2x?x?x16xf32, #sym.dims<"2 + h", "2 + w">>
// CHECK-COUNT-4: loop.block "conv2d_nchwc_pad_zero"
// CHECK:         loop.block "conv2d_nchwc_pad_copy"
// CHECK:         loop.for %{{.*}} = 0 to 4 step 4 serial {
// CHECK:           loop.for %io = %{{.*}} to %{{.*}} step 6 serial {
// CHECK-NEXT:        %acc = loop.alloc "local" : memref<24x16xf32>
// CHECK-COUNT-24:    loop.block "conv2d_nchwc_init"
// CHECK:             loop.for %{{.*}} = 0 to 2 serial {
// CHECK-NOT:           arith.select
// CHECK-COUNT-24:      loop.block "conv2d_nchwc" [
// CHECK:           } {dyn.blocked = "6x4x16"}
// CHECK:           loop.for %io_1 = %{{.*}} to %{{.*}} step 2 serial {
// CHECK-NEXT:        %acc_1 = loop.alloc "local" : memref<8x16xf32>
// CHECK:           } {dyn.blocked = "2x4x16", dyn.leftover}
// CHECK:           loop.for %io_2 = %{{.*}} to %w serial {
// CHECK-NEXT:        %acc_2 = loop.alloc "local" : memref<4x16xf32>
// CHECK:           } {dyn.blocked = "1x4x16", dyn.leftover}
