// RUN: ziggurat-opt %s -p convert-graph-to-te --split-input-file | filecheck %s

// Signed integer Div truncates toward zero; a zero divisor gives 0 and
// MIN / -1 wraps (the bare divsi would trap on both).
func.func @main(%a: tensor<4xi32>, %b: tensor<4xi32>) -> tensor<4xi32> {
  %q = graph.div %a, %b : tensor<4xi32>, tensor<4xi32> -> tensor<4xi32>
  func.return %q : tensor<4xi32>
}
// CHECK-LABEL: func.func @div_0(%in0: tensor<4xi32>, %in1: tensor<4xi32>) -> tensor<4xi32> {
// CHECK:         %[[A:.*]] = te.read %in0[%{{.*}}] : tensor<4xi32>
// CHECK-NEXT:    %[[B:.*]] = te.read %in1[%{{.*}}] : tensor<4xi32>
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT:    %[[BZ:.*]] = arith.cmpi eq, %[[B]], %[[ZERO]] : i32
// CHECK-NEXT:    %[[M1:.*]] = arith.constant -1 : i32
// CHECK-NEXT:    %[[BM1:.*]] = arith.cmpi eq, %[[B]], %[[M1]] : i32
// CHECK-NEXT:    %[[BAD:.*]] = arith.ori %[[BZ]], %[[BM1]] : i1
// CHECK-NEXT:    %[[SAFE:.*]] = arith.select %[[BAD]], %[[ONE]], %[[B]] : i32
// CHECK-NEXT:    %[[Q:.*]] = arith.divsi %[[A]], %[[SAFE]] : i32
// CHECK-NEXT:    %[[NEG:.*]] = arith.subi %[[ZERO]], %[[A]] : i32
// CHECK-NEXT:    %[[Q1:.*]] = arith.select %[[BM1]], %[[NEG]], %[[Q]] : i32
// CHECK-NEXT:    %[[Q2:.*]] = arith.select %[[BZ]], %[[ZERO]], %[[Q1]] : i32
// CHECK-NEXT:    te.yield %[[Q2]] : i32

// -----

// Unsigned tensors: kernels are signless (ui8 -> i8) and use the unsigned
// instructions (remui, cmpi ult); a comparison yields i1.
func.func @main(%a: tensor<4xui8>, %b: tensor<4xui8>) -> tensor<4xi1> {
  %m = graph.mod %a, %b {fmod = 0 : i64} : tensor<4xui8>, tensor<4xui8> -> tensor<4xui8>
  %c = graph.compare %m, %b {kind = "lt"} : tensor<4xui8>, tensor<4xui8> -> tensor<4xi1>
  func.return %c : tensor<4xi1>
}
// CHECK-LABEL: func.func @main(%a: tensor<4xui8>, %b: tensor<4xui8>) -> tensor<4xi1> {
// CHECK-NEXT:    %m = graph.call_kernel @mod_0(%a, %b) : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
// CHECK-LABEL: func.func @mod_0(%in0: tensor<4xi8>, %in1: tensor<4xi8>) -> tensor<4xi8> {
// CHECK:         arith.remui %{{.*}}, %{{.*}} : i8
// CHECK-NOT:     arith.remsi
// CHECK-LABEL: func.func @compare_0(%in0: tensor<4xi8>, %in1: tensor<4xi8>) -> tensor<4xi1> {
// CHECK:         %[[C:.*]] = arith.cmpi ult, %{{.*}}, %{{.*}} : i8
// CHECK-NEXT:    te.yield %[[C]] : i1

// -----

// Float -> int64 Cast truncates toward zero, clamped into range, NaN -> 0.
func.func @main(%x: tensor<4xf32>) -> tensor<4xi64> {
  %y = graph.cast %x : tensor<4xf32> -> tensor<4xi64>
  func.return %y : tensor<4xi64>
}
// CHECK-LABEL: func.func @cast_0(%in0: tensor<4xf32>) -> tensor<4xi64> {
// CHECK:         %[[W:.*]] = arith.extf %{{.*}} : f32 to f64
// CHECK-NEXT:    %[[T:.*]] = math.trunc %[[W]] : f64
// CHECK:         arith.maximumf %[[T]]
// CHECK:         arith.minimumf
// CHECK:         arith.cmpf uno, %[[W]], %[[W]] : f64
// CHECK:         arith.fptosi %{{.*}} : f64 to i64

// -----

// Must not fire: float Div stays one divf, without integer guards.
func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %q = graph.div %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  func.return %q : tensor<4xf32>
}
// CHECK-LABEL: func.func @div_0(%in0: tensor<4xf32>, %in1: tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NOT:     arith.cmpi
// CHECK:         arith.divf %{{.*}}, %{{.*}} : f32
// CHECK-NOT:     arith.select
// CHECK:         te.yield
