// RUN: ziggurat-opt %s -p 'convert-te-to-loop,loop-dynamic-schedule' | filecheck %s
// RUN: ziggurat-opt %s -p 'convert-te-to-loop,loop-dynamic-schedule,convert-loop-to-hw' | filecheck %s --check-prefix=HW

// A matmul over `m` rows and `n` columns (an attention product) and its scaling: a register block
// of 8 rows by one vector of columns with its accumulators in a local [8, 16] buffer, the rows
// left over in blocks of one; the scaling runs in the store blocks (the product's buffer goes).
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
// CHECK:         loop.for %io = %{{.*}} to %{{.*}} step 8 parallel {
// CHECK-NEXT:      %acc = loop.alloc "local" : memref<8x16xf32>
// CHECK-NEXT:      loop.for %jo = 0 to %n step 16 serial {
// CHECK:             loop.for %jl = 0 to %{{.*}} vectorized {
// CHECK-COUNT-8:       loop.block "matmul_init"
// CHECK:               loop.for %{{.*}} = 0 to 32 serial {
// CHECK-COUNT-8:         loop.block "matmul" [
// CHECK:               }
// CHECK:             loop.block "matmul_store"
// CHECK:               arith.mulf
// CHECK-NEXT:          loop.store %{{.*}}, %out0
// CHECK:         } {dyn.blocked = "8x16"}
// CHECK-NEXT:    loop.for %io_1 = %{{.*}} to %m serial {
// CHECK-NEXT:      %acc_1 = loop.alloc "local" : memref<1x16xf32>
// CHECK:         } {dyn.blocked = "1x16"}
// CHECK-NOT:     loop.block "scale"

// The block's column vector: accumulators loaded and stored at [u, lane], B a vector, A broadcast,
// a masked tail where the columns run out.
// HW-LABEL: func.func @mm(
// HW:         hw.vlanecmp "slt"
// HW:         hw.vbroadcast
// HW:         hw.vfma
