// RUN: ziggurat-opt %s -p 'loop-parallel{block=b loop=1}' | filecheck %s
// RUN: not ziggurat-opt %s -p 'loop-parallel{block=s loop=1}' 2>&1 | filecheck %s --check-prefix=ERR

// CHECK-LABEL: func.func @k
// CHECK:         loop.for %i = 0 to 4 serial {
// CHECK-NEXT:      loop.for %j = 0 to 32 parallel {
func.func @k(%x: memref<4x32xf32>, %y: memref<4x32xf32>) {
  loop.for %i = 0 to 4 serial {
    loop.for %j = 0 to 32 serial {
      loop.block "b" [S %a = %i, S %v = %j] {
        %e = loop.load %x[%a, %v] : memref<4x32xf32>
        loop.store %e, %y[%a, %v] : memref<4x32xf32>
      }
    }
  }
  func.return
}

// A reduction loop must not run on threads.
// ERR: parallel: loop %k (0 to 32) around block(s) ['s'] carries a reduction (a block binds it as R); threads would race on the accumulator
func.func @r(%x: memref<4x32xf32>, %y: memref<4xf32>) {
  loop.for %i = 0 to 4 serial {
    loop.block "s_init" [S %a = %i] {
      %z = arith.constant 0.000000e+00 : f32
      loop.store %z, %y[%a] : memref<4xf32>
    }
    loop.for %k = 0 to 32 serial {
      loop.block "s" [S %b = %i, R %c = %k] {
        %e = loop.load %x[%b, %c] : memref<4x32xf32>
        %o = loop.load %y[%b] : memref<4xf32>
        %n = arith.addf %o, %e : f32
        loop.store %n, %y[%b] : memref<4xf32>
      }
    }
  }
  func.return
}
