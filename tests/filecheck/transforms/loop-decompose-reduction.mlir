// RUN: ziggurat-opt %s -p 'loop-decompose-reduction{block=s loop=0}' | filecheck %s
// RUN: ziggurat-opt %s -p 'loop-decompose-reduction{block=s loop=0},loop-reorder{block=s loops=2,0,1}' | filecheck %s --check-prefix=REORD
// RUN: not ziggurat-opt %s -p 'loop-split{block=s loop=2 factor=4},loop-decompose-reduction{block=s loop=3}' 2>&1 | filecheck %s --check-prefix=INNER
// RUN: not ziggurat-opt %s -p 'loop-decompose-reduction{block=s_init loop=0}' 2>&1 | filecheck %s --check-prefix=NOTRED
// RUN: not ziggurat-opt %s -p 'loop-decompose-reduction{block=s loop=0},loop-decompose-reduction{block=s loop=0}' 2>&1 | filecheck %s --check-prefix=TWICE

// The init block gets its own copy of %i (and of the split index arithmetic) before the update nest.
// CHECK-LABEL: func.func @r
// CHECK:         loop.for %i_o = 0 to 2 serial {
// CHECK-NEXT:      loop.for %i_i = 0 to 2 serial {
// CHECK-NEXT:        %{{.*}} = arith.constant 2 : index
// CHECK-NEXT:        %{{.*}} = arith.muli %i_o, %{{.*}} : index
// CHECK-NEXT:        %[[I:.*]] = arith.addi %{{.*}}, %i_i : index
// CHECK-NEXT:        loop.block "s_init" [S %a = %[[I]]] {
// CHECK:           loop.store
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:  }
// CHECK-NEXT:  loop.for %{{.*}} = 0 to 2 serial {
// CHECK-NEXT:    loop.for %{{.*}} = 0 to 2 serial {
// CHECK-NOT:         loop.block "s_init"
// CHECK:             loop.for %k = 0 to 32 serial {
// CHECK-NEXT:          loop.block "s" [S %b = %{{.*}}, R %c = %k] {

// Afterwards the reduction loop can move outside the spatial loop.
// REORD:       loop.for %k = 0 to 32 serial {
// REORD-NEXT:    loop.for %{{.*}} = 0 to 2 serial {
// REORD:           loop.block "s" [S %b = %{{.*}}, R %c = %k] {

// INNER: decompose_reduction: loop %k_i (0 to 4) around block(s) ['s'] lies inside the loop(s) the init block 's_init' sits beside; pick one of the 3 outer loops of 's'
// NOTRED: decompose_reduction: block 's_init' is not a reduction (no R variable)
// TWICE: decompose_reduction: init block 's_init' is not beside the loops of block 's' (already decomposed?)
func.func @r(%x: memref<4x32xf32>, %y: memref<4xf32>) {
  loop.for %i_o = 0 to 2 serial {
    loop.for %i_i = 0 to 2 serial {
      %c2 = arith.constant 2 : index
      %t = arith.muli %i_o, %c2 : index
      %i = arith.addi %t, %i_i : index
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
  }
  func.return
}
