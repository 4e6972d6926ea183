// RUN: ziggurat-opt %s -p 'convert-te-to-loop,loop-dynamic-schedule' | filecheck %s
// RUN: ziggurat-opt %s -p 'convert-te-to-loop,loop-dynamic-schedule,convert-loop-to-hw' | filecheck %s --check-prefix=HW

// A matmul over `m` rows and `n` columns (an attention product): a register block of 8 rows by
// one vector of columns with its accumulators in a local [8, 16] buffer, the rows left over by
// the generic nest with its column loop inside the reduction loop.
func.func @mm(%a: tensor<?x32xf32, #sym.dims<"m">>, %b: tensor<32x?xf32, #sym.dims<"n">>) -> tensor<?x?xf32, #sym.dims<"m", "n">> {
  %y = te.reduce "matmul" add init 0.0 : f32 (%i, %j) reduce (%k : 32) : tensor<?x?xf32, #sym.dims<"m", "n">> {
    %x = te.read %a[%i, %k] : tensor<?x32xf32, #sym.dims<"m">>
    %w = te.read %b[%k, %j] : tensor<32x?xf32, #sym.dims<"n">>
    %p = arith.mulf %x, %w : f32
    te.yield %p : f32
  }
  func.return %y : tensor<?x?xf32, #sym.dims<"m", "n">>
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
// CHECK-COUNT-8:       loop.block "matmul_store"
// CHECK:         } {dyn.blocked = "8x16"}
// CHECK-NEXT:    loop.for %{{.*}} = %{{.*}} to %m parallel {
// CHECK:           loop.for %{{.*}} = 0 to %n vectorized {
// CHECK:             loop.block "matmul_init"
// CHECK:           loop.for %{{.*}} = 0 to 32 serial {
// CHECK-NEXT:        loop.for %{{.*}} = 0 to %n vectorized {
// CHECK-NEXT:          loop.block "matmul" [

// The block's column vector: accumulators loaded and stored at [u, lane], B a vector, A broadcast,
// a masked tail where the columns run out.
// HW-LABEL: func.func @mm(
// HW:         hw.vlanecmp "slt"
// HW:         hw.vbroadcast
// HW:         hw.vfma
