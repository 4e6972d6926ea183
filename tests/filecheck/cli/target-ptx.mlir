// `-t ptx` lowers IR of any level the rest of the way for a CUDA target (cuda_pipeline) and prints
// the launch list of @main as comments, then the PTX of LLVM's NVPTX backend.
// RUN: ziggurat-opt %s --split-input-file -t 'ptx{arch="sm_90"}' > %t.ptx
// RUN: filecheck %s < %t.ptx
// RUN: filecheck %s --check-prefix=GEMM < %t.ptx
// RUN: filecheck %s --check-prefix=EPI < %t.ptx
// RUN: ziggurat-opt %s --split-input-file -p convert-graph-to-te,convert-te-to-loop -t 'ptx{arch="sm_90"}' | filecheck %s --check-prefix=LOOP
// RUN: ziggurat-opt %s --split-input-file -t ptx | filecheck %s --check-prefix=DEFAULT
// RUN: ziggurat-opt %s --split-input-file -t 'llvm{target="cuda -arch=sm_90"}' | filecheck %s --check-prefix=NVPTX
// RUN: not ziggurat-opt %s --split-input-file -t 'ptx{arch="sm_91"}' 2>&1 | filecheck %s --check-prefix=ARCH

// A matrix product (the GEMM template: a 64 x 64 tile of C per block of 256 threads, A and B
// staged through shared memory; 48 x 100 is 2 tiles) and its relu epilogue, a thread per element:
// 48 x 100 = 4800 elements on 19 blocks of 256 threads, the threads past the end skipped.
// CHECK:      // sm_90: 2 launch(es)
// CHECK-NEXT: // launch fused_matmul_relu_0_s0 grid=(2,1,1) block=(256,1,1) args=(input 0, input 1, arena [[OFF:[0-9]+]])
// CHECK-NEXT: // launch fused_matmul_relu_0_s1 grid=(19,1,1) block=(256,1,1) args=(output 0, arena [[OFF]])
// CHECK:      .version
// CHECK-NEXT: .target sm_90
// CHECK-DAG:  .visible .entry fused_matmul_relu_0_s0(
// CHECK-DAG:  .visible .entry fused_matmul_relu_0_s1(
// The GEMM kernel: its thread and block, the tiles stored to shared memory, one barrier per
// step of k, 16-byte fragment loads from shared memory, the FMAs.
// GEMM:       .visible .entry fused_matmul_relu_0_s0(
// GEMM-DAG:   mov.u32 {{%r[0-9]+}}, %tid.x;
// GEMM-DAG:   mov.u32 {{%r[0-9]+}}, %ctaid.x;
// GEMM:       st.shared
// GEMM:       bar.sync 0;
// GEMM:       ld.shared.v4.b32
// GEMM:       fma.rn.f32
// GEMM:       ret;
// The epilogue: index = ctaid.x * 256 + tid.x; the tail guard: an index above 4799 branches past the body.
// EPI:        .visible .entry fused_matmul_relu_0_s1(
// EPI-DAG:    mov.u32 {{%r[0-9]+}}, %ctaid.x;
// EPI-DAG:    mov.u32 {{%r[0-9]+}}, %tid.x;
// EPI:        mul.wide.u32 {{%rd[0-9]+}}, {{%r[0-9]+}}, 256;
// EPI:        setp.gt.u64 [[P:%p[0-9]+]], {{%rd[0-9]+}}, 4799;
// EPI-NEXT:   @[[P]] bra
// EPI:        max.NaN.f32
// EPI:        ret;
// Loop-level IR (no graph passes ran: no fusion) goes through the rest of the pipeline from there.
// LOOP:       // launch matmul_0 grid=(2,1,1) block=(256,1,1) args=(input 0, input 1, arena [[OFF:[0-9]+]])
// LOOP-NEXT:  // launch relu_0 grid=(19,1,1) block=(256,1,1) args=(arena [[OFF]], output 0)
// LOOP:       bar.sync
// LOOP:       // launch neg_0 grid=(4,1,1) block=(32,1,1) args=(input 0, output 0)
// DEFAULT:    .target sm_80
// `-t llvm` with a CUDA target prints the kernels' NVPTX LLVM IR (what -t ptx compiles).
// NVPTX:      ; launch fused_matmul_relu_0_s0 grid=(2,1,1) block=(256,1,1)
// NVPTX:      target triple = "nvptx64-nvidia-cuda"
// NVPTX:      define ptx_kernel void @"fused_matmul_relu_0_s
// NVPTX:      call i32 @"llvm.nvvm.read.ptx.sreg.tid.x"()
// NVPTX:      ; launch neg_0 grid=(4,1,1) block=(32,1,1)
// NVPTX:      define ptx_kernel void @"neg_0"(
// ARCH:       ziggurat-opt: error: -arch=sm_91: ziggurat emits PTX for sm_70, sm_75, sm_80, sm_86, sm_89, sm_90
func.func @main(%a: tensor<48x40xf32>, %b: tensor<40x100xf32>) -> tensor<48x100xf32> attributes {graph.input_names = ["a", "b"], graph.output_names = ["y"]} {
  %c = graph.matmul %a, %b : tensor<48x40xf32>, tensor<40x100xf32> -> tensor<48x100xf32>
  %y = graph.relu %c : tensor<48x100xf32>
  func.return %y : tensor<48x100xf32>
}

// -----

// Loop-level IR bound by hand (loop-bind) keeps its schedule: 4 blocks of 32 threads, no guard.
// CHECK:      // sm_90: 1 launch(es), arena 0 bytes
// CHECK-NEXT: // launch neg_0 grid=(4,1,1) block=(32,1,1) args=(input 0, output 0)
// CHECK:      .visible .entry neg_0(
// CHECK-NOT:  setp
// CHECK:      neg.f32
// CHECK:      ret;
func.func @main(%x: memref<4x32xf32>, %y: memref<4x32xf32>) attributes {graph.input_names = ["x"], graph.output_names = ["y"]} {
  func.call @neg_0(%x, %y) : (memref<4x32xf32>, memref<4x32xf32>) -> ()
  func.return
}
func.func @neg_0(%x: memref<4x32xf32>, %y: memref<4x32xf32>) {
  loop.for %i = 0 to 4 blockIdx.x {
    loop.for %j = 0 to 32 threadIdx.x {
      loop.block "neg" [S %a = %i, S %b = %j] {
        %v = loop.load %x[%a, %b] : memref<4x32xf32>
        %n = arith.negf %v : f32
        loop.store %n, %y[%a, %b] : memref<4x32xf32>
      }
    }
  }
  func.return
}
