// RUN: python -c "import numpy as np; np.savez('%t.npz', w=np.ones((128,1024),np.float32), v=np.ones((128,512),np.float32), o=np.ones((128,384),np.float32), u=np.ones((256,1024),np.float32), t=np.ones((512,128),np.float32))"
// RUN: sed 's#WEIGHTS#%t.npz#' %s | ziggurat-opt -p 'fuse-ops{cost-guided=true peak-gflops=100 bandwidth-gbs=20 vector-width=8}' | filecheck %s --check-prefix=W8
// RUN: sed 's#WEIGHTS#%t.npz#' %s | ziggurat-opt -p 'fuse-ops{cost-guided=true peak-gflops=100 bandwidth-gbs=20 vector-width=16}' | filecheck %s --check-prefix=W16
// RUN: sed 's#WEIGHTS#%t.npz#' %s | ziggurat-opt -p 'fuse-ops{cost-guided=false}' | filecheck %s --check-prefix=RULES

// The roofline prices a matmul's constant weight B three ways: as it is, stored
// transposed (`transpose_b`) and stored in the column panels the schedule reads
// (`graph.matmul_panels`, `[N/w, K, w]`). As it is, the default schedule either
// walks B down a column in its reduction loop, which the L1 set-conflict term
// (transforms/costs/cost_oracle.py, `_conflict_lines`) prices: rows of 1024 floats
// (4 KiB) map every trip to one L1 set, 512 floats to two, so the walk misses
// L1 on every line (@wide, @half); or it packs B into panels on every call
// (8 lanes, k = 256: @deep), a copy phase priced by its traffic. Stored in
// panels, B is read contiguously and nothing is packed at run time. The panels
// are taken where they price no higher than B as it is, so also on a tie
// (@odd: rows of 384 floats spread the walk over 8 sets, which hold it; @half at
// 16 lanes, whose 8-row blocks walk B half as often): measured, they were never
// slower (docs/feedback.md, "Packed weights"). The transposed weight prices like
// the panels here and needs a 2% gain, so it is not taken.

// W8-LABEL:  func.func @wide
// W8:        %[[P:.*]] = graph.constant "w.p8" : tensor<128x128x8xf32>
// W8-NEXT:   %y = graph.matmul_panels %x, %[[P]] {graph.fusion_decision = "packed: 1 group -> 1, cost 1310.72us -> 335.54us"} : tensor<128x128xf32>, tensor<128x128x8xf32> -> tensor<128x1024xf32>
// W8-LABEL:  func.func @half
// W8:        %[[H:.*]] = graph.constant "v.p8" : tensor<64x128x8xf32>
// W8-NEXT:   %y = graph.matmul_panels %x, %[[H]] {graph.fusion_decision = "packed: 1 group -> 1, cost 327.68us -> 167.77us"}
// W8-LABEL:  func.func @odd
// W8:        %y = graph.matmul_panels %x, %{{.*}} {graph.fusion_decision = "packed: 1 group -> 1, cost 125.83us -> 125.83us"} : tensor<128x128xf32>, tensor<48x128x8xf32>
// W8-LABEL:  func.func @deep
// W8:        %[[U:.*]] = graph.constant "u.p8" : tensor<128x256x8xf32>
// W8-NEXT:   %y = graph.matmul_panels %x, %[[U]] {graph.fusion_decision = "packed: 1 group -> 1, cost 775.95us -> 671.09us"}
// W8-LABEL:  func.func @gemm
// W8:        %[[G:.*]] = graph.constant "t.p8" : tensor<64x128x8xf32>
// W8-NEXT:   %y = graph.matmul_panels %x, %[[G]] {graph.fusion_decision = "packed: 1 group -> 1, cost
// W8-SAME:   tensor<32x128xf32>, tensor<64x128x8xf32> -> tensor<32x512xf32>
// W8-LABEL:  func.func @gemv
// W8:        %y = graph.matmul %x, %t {transpose_b = true} : tensor<1x128xf32>, tensor<512x128xf32> -> tensor<1x512xf32>

// W16-LABEL: func.func @wide
// W16:       graph.matmul_panels %x, %{{.*}} {graph.fusion_decision = "packed: 1 group -> 1, cost 655.36us -> 335.54us"} : tensor<128x128xf32>, tensor<64x128x16xf32>
// W16-LABEL: func.func @half
// W16:       graph.matmul_panels %x, %{{.*}} {graph.fusion_decision = "packed: 1 group -> 1, cost 167.77us -> 167.77us"} : tensor<128x128xf32>, tensor<32x128x16xf32>
// W16-LABEL: func.func @odd
// W16:       graph.matmul_panels %x, %{{.*}} : tensor<128x128xf32>, tensor<24x128x16xf32>
// W16-LABEL: func.func @deep
// W16:       %[[U:.*]] = graph.constant "u.p16" : tensor<64x256x16xf32>
// W16-NEXT:  %y = graph.matmul_panels %x, %[[U]] {graph.fusion_decision = "packed: 1 group -> 1, cost 775.95us -> 671.09us"}

// A weight stored transposed (Gemm(transB=1)) goes to panels of its transpose
// from two rows on (@gemm); a one-row product keeps the dot kernel (@gemv).

// RULES-NOT: graph.matmul_panels

builtin.module attributes {graph.weights_file = "WEIGHTS"} {
  func.func @wide(%x: tensor<128x128xf32>) -> tensor<128x1024xf32> {
    %w = graph.constant "w" : tensor<128x1024xf32>
    %y = graph.matmul %x, %w : tensor<128x128xf32>, tensor<128x1024xf32> -> tensor<128x1024xf32>
    func.return %y : tensor<128x1024xf32>
  }
  func.func @half(%x: tensor<128x128xf32>) -> tensor<128x512xf32> {
    %v = graph.constant "v" : tensor<128x512xf32>
    %y = graph.matmul %x, %v : tensor<128x128xf32>, tensor<128x512xf32> -> tensor<128x512xf32>
    func.return %y : tensor<128x512xf32>
  }
  func.func @odd(%x: tensor<128x128xf32>) -> tensor<128x384xf32> {
    %o = graph.constant "o" : tensor<128x384xf32>
    %y = graph.matmul %x, %o : tensor<128x128xf32>, tensor<128x384xf32> -> tensor<128x384xf32>
    func.return %y : tensor<128x384xf32>
  }
  func.func @deep(%x: tensor<128x256xf32>) -> tensor<128x1024xf32> {
    %u = graph.constant "u" : tensor<256x1024xf32>
    %y = graph.matmul %x, %u : tensor<128x256xf32>, tensor<256x1024xf32> -> tensor<128x1024xf32>
    func.return %y : tensor<128x1024xf32>
  }
  func.func @gemm(%x: tensor<32x128xf32>) -> tensor<32x512xf32> {
    %t = graph.constant "t" : tensor<512x128xf32>
    %y = graph.matmul %x, %t {transpose_b = true} : tensor<32x128xf32>, tensor<512x128xf32> -> tensor<32x512xf32>
    func.return %y : tensor<32x512xf32>
  }
  func.func @gemv(%x: tensor<1x128xf32>) -> tensor<1x512xf32> {
    %t = graph.constant "t" : tensor<512x128xf32>
    %y = graph.matmul %x, %t {transpose_b = true} : tensor<1x128xf32>, tensor<512x128xf32> -> tensor<1x512xf32>
    func.return %y : tensor<1x512xf32>
  }
}
