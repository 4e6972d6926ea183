// RUN: ziggurat-opt %s -p 'loop-tensorize{block=qmm loop=3 intrin=x86_vnni_u8s8_16x4}' | filecheck %s
// RUN: not ziggurat-opt %s -p 'loop-tensorize{block=qmm loop=2 intrin=x86_vnni_u8s8_16x4}' 2>&1 | filecheck %s --check-prefix=TRIP
// RUN: not ziggurat-opt %s -p 'loop-tensorize{block=qmm loop=3 intrin=x86_bf16_16x2}' 2>&1 | filecheck %s --check-prefix=KIND
// RUN: not ziggurat-opt %s -p 'loop-tensorize{block=signed loop=1 intrin=x86_vnni_u8s8_16x4}' 2>&1 | filecheck %s --check-prefix=OPS
// RUN: not ziggurat-opt %s -p 'loop-tensorize{block=qmm loop=3 intrin=nope}' 2>&1 | filecheck %s --check-prefix=NAME

// The 16 x 4 (column, k) sub-nest of an int8 GEMM over B packed [k/4][N*4] becomes one vpdpbusd.
// CHECK-LABEL: func.func @qmm
// CHECK:         loop.for %r0 = 0 to 16 serial {
// CHECK:           %[[A:.*]] = hw.vload %a[%i0, %{{.*}}] : memref<8x64xi8> -> vector<4xi8>
// CHECK-NEXT:      %[[Q:.*]] = x86vec.bcast_group %[[A]] : vector<4xi8> -> vector<64xi8>
// CHECK-NEXT:      %[[B:.*]] = hw.vload %b[%r0, %{{.*}}] : memref<16x128xi8> -> vector<64xi8>
// CHECK-NEXT:      %[[C:.*]] = hw.vload %c[%i0, %{{.*}}] : memref<8x32xi32> -> vector<16xi32>
// CHECK-NEXT:      %[[R:.*]] = x86vec.dpbusd %[[C]], %[[Q]], %[[B]] : vector<16xi32>, vector<64xi8>, vector<64xi8>
// CHECK-NEXT:      hw.vstore %[[R]], %c[%i0, %{{.*}}] : vector<16xi32>, memref<8x32xi32>
// CHECK-NOT:     loop.block "qmm"

// TRIP: tensorize 'x86_vnni_u8s8_16x4': the description has 2 loops, so the innermost one, loop %i1_i (0 to 16) around block(s) ['qmm'], must hold exactly one loop.block; it holds ['loop.for']
// KIND: tensorize 'x86_bf16_16x2': loop %r1 (0 to 4) around block(s) ['qmm'] (serial) must be a serial loop from 0 to 2 step 1
// OPS: tensorize 'x86_vnni_u8s8_16x4': 'arith.extsi' in block 'signed' does not match the description's 'arith.extui'
// NAME: no tensor intrinsic 'nope'; known: {{.*}}x86_vnni_u8s8_16x4

func.func @qmm(%a: memref<8x64xi8>, %b: memref<16x128xi8>, %c: memref<8x32xi32>) {
  loop.for %i0 = 0 to 8 serial {
    loop.for %i1_o = 0 to 2 serial {
      loop.for %r0 = 0 to 16 serial {
        loop.for %i1_i = 0 to 16 serial {
          loop.for %r1 = 0 to 4 serial {
            %c16 = arith.constant 16 : index
            %t = arith.muli %i1_o, %c16 : index
            %i1 = arith.addi %t, %i1_i : index
            loop.block "qmm" [S %vi = %i0, S %vj = %i1, R %vko = %r0, R %vki = %r1] {
              %c4 = arith.constant 4 : index
              %m = arith.muli %vko, %c4 : index
              %k = arith.addi %m, %vki : index
              %j4 = arith.muli %vj, %c4 : index
              %jk = arith.addi %j4, %vki : index
              %x = loop.load %a[%vi, %k] : memref<8x64xi8>
              %w = loop.load %b[%vko, %jk] : memref<16x128xi8>
              %xe = arith.extui %x : i8 to i32
              %we = arith.extsi %w : i8 to i32
              %p = arith.muli %xe, %we : i32
              %acc = loop.load %c[%vi, %vj] : memref<8x32xi32>
              %s = arith.addi %acc, %p : i32
              loop.store %s, %c[%vi, %vj] : memref<8x32xi32>
            }
          }
        }
      }
    }
  }
  func.return
}

// A signed x signed product is not what vpdpbusd (unsigned x signed) computes.
func.func @signed(%a: memref<4x4xi8>, %b: memref<1x64xi8>, %c: memref<4x16xi32>) {
  loop.for %i = 0 to 4 serial {
    loop.for %j = 0 to 16 serial {
      loop.for %k = 0 to 4 serial {
        loop.block "signed" [S %vi = %i, S %vj = %j, R %vk = %k] {
          %c4 = arith.constant 4 : index
          %z = arith.constant 0 : index
          %j4 = arith.muli %vj, %c4 : index
          %jk = arith.addi %j4, %vk : index
          %x = loop.load %a[%vi, %vk] : memref<4x4xi8>
          %w = loop.load %b[%z, %jk] : memref<1x64xi8>
          %xe = arith.extsi %x : i8 to i32
          %we = arith.extsi %w : i8 to i32
          %p = arith.muli %xe, %we : i32
          %acc = loop.load %c[%vi, %vj] : memref<4x16xi32>
          %s = arith.addi %acc, %p : i32
          loop.store %s, %c[%vi, %vj] : memref<4x16xi32>
        }
      }
    }
  }
  func.return
}
