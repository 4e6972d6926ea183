// RUN: ziggurat-opt %s -p 'te-row-blocks' | filecheck %s
// RUN: ziggurat-opt %s -p 'te-row-blocks,convert-te-to-loop' | filecheck %s --check-prefix=LOOP

// A kernel over symbolic rows (a bias add over `n` rows) gets static copies of 64, 16, 4 and 1 rows;
// a kernel whose symbol is not its leading dim (a reduction over `n`) gets none.
func.func @bias(%x: tensor<?x8xf32, #sym.dims<"n">>, %b: tensor<8xf32>) -> tensor<?x8xf32, #sym.dims<"n">> {
  %y = te.compute "add" (%i, %j) : tensor<?x8xf32, #sym.dims<"n">> {
    %a = te.read %x[%i, %j] : tensor<?x8xf32, #sym.dims<"n">>
    %c = te.read %b[%j] : tensor<8xf32>
    %s = arith.addf %a, %c : f32
    te.yield %s : f32
  }
  func.return %y : tensor<?x8xf32, #sym.dims<"n">>
}
func.func @colsum(%x: tensor<?x8xf32, #sym.dims<"n">>) -> tensor<8xf32> {
  %y = te.reduce "sum" add init 0.0 : f32 (%j) reduce (%k : "n") : tensor<8xf32> {
    %a = te.read %x[%k, %j] : tensor<?x8xf32, #sym.dims<"n">>
    te.yield %a : f32
  }
  func.return %y : tensor<8xf32>
}

// CHECK:      func.func @bias({{.*}}) {{.*}} attributes {te.row_blocks = array<i64: 64, 16, 4, 1>}
// CHECK:      func.func @bias_rows1(%{{.*}}: tensor<1x8xf32>, %{{.*}}: tensor<8xf32>) -> tensor<1x8xf32>
// CHECK:      func.func @bias_rows4(
// CHECK:      func.func @bias_rows16(
// CHECK:      func.func @bias_rows64(%{{.*}}: tensor<64x8xf32>, %{{.*}}: tensor<8xf32>) -> tensor<64x8xf32>
// CHECK-NEXT:   te.compute "add" (%{{.*}}, %{{.*}}) : tensor<64x8xf32>
// CHECK:      func.func @colsum(
// CHECK-NOT:  te.row_blocks

// The driver: blocks of 64 rows in a parallel loop, then 16, 4 and 1, each a loop.rows view.
// LOOP-LABEL: func.func @bias(
// LOOP-SAME:    loop.scheduled
// LOOP:         loop.for %rows64 = %{{.*}} to %{{.*}} step 64 parallel {
// LOOP-NEXT:      %{{.*}} = loop.rows %in0[%rows64] : memref<?x8xf32, #sym.dims<"n">> -> memref<64x8xf32>
// LOOP-NEXT:      %{{.*}} = loop.rows %out0[%rows64] : memref<?x8xf32, #sym.dims<"n">> -> memref<64x8xf32>
// LOOP-NEXT:      func.call @bias_rows64(
// LOOP:         loop.for %rows16 = %{{.*}} to %{{.*}} step 16 serial {
// LOOP:         loop.for %rows1 = %{{.*}} to %{{.*}} serial {
