// RUN: python -c "import numpy as np; np.savez('%t.npz', w=np.ones((128,1024),np.float32), v=np.ones((128,512),np.float32), o=np.ones((128,384),np.float32), u=np.ones((256,1024),np.float32))"
// RUN: sed 's#WEIGHTS#%t.npz#' %s | ziggurat-opt -p 'fuse-ops{cost-guided=true peak-gflops=100 bandwidth-gbs=20 vector-width=8}' | filecheck %s --check-prefix=W8
// RUN: sed 's#WEIGHTS#%t.npz#' %s | ziggurat-opt -p 'fuse-ops{cost-guided=true peak-gflops=100 bandwidth-gbs=20 vector-width=16}' | filecheck %s --check-prefix=W16
// RUN: sed 's#WEIGHTS#%t.npz#' %s | ziggurat-opt -p 'fuse-ops{cost-guided=false}' | filecheck %s --check-prefix=RULES

// The roofline's L1 set-conflict term (autotune/cost_oracle.py, `_conflict_lines`)
// prices a matmul whose default schedule walks the constant weight B down a
// column in its reduction loop: with rows of 1024 floats (4 KiB) every trip
// maps to one L1 set, with 512 floats to two, so the walk misses L1 on every
// line. Stored transposed (`transpose_b`), B is read along its rows and the
// conflict is gone, so cost-guided fuse-ops transposes the weight at compile
// time. Rows of 384 floats spread the walk over 8 sets, which hold its 128
// lines (@odd: kept). With 8 lanes the schedule packs B into contiguous panels
// when k = 256 (@deep: kept); with 16 lanes it walks B unpacked (@deep:
// transposed), but with 8-row blocks, half as often as the 8-lane 4-row
// blocks, so @half's two-set walk costs no more than its flops.

// W8-LABEL:  func.func @wide
// W8:        %[[T:.*]] = graph.constant "w.T" : tensor<1024x128xf32>
// W8-NEXT:   %y = graph.matmul %x, %[[T]] {graph.fusion_decision = "transposed: 1 group -> 1, cost 1310.72us -> 335.54us", transpose_b = true} : tensor<128x128xf32>, tensor<1024x128xf32> -> tensor<128x1024xf32>
// W8-LABEL:  func.func @half
// W8:        %[[H:.*]] = graph.constant "v.T" : tensor<512x128xf32>
// W8-NEXT:   %y = graph.matmul %x, %[[H]] {graph.fusion_decision = "transposed: 1 group -> 1, cost 327.68us -> 167.77us", transpose_b = true}
// W8-LABEL:  func.func @odd
// W8-NOT:    transpose_b
// W8:        %y = graph.matmul %x, %o : tensor<128x128xf32>, tensor<128x384xf32> -> tensor<128x384xf32>
// W8-LABEL:  func.func @deep
// W8-NOT:    transpose_b
// W8:        %y = graph.matmul %x, %u : tensor<128x256xf32>, tensor<256x1024xf32> -> tensor<128x1024xf32>

// W16-LABEL: func.func @wide
// W16:       graph.matmul %x, %{{.*}} {graph.fusion_decision = "transposed: 1 group -> 1, cost 655.36us -> 335.54us", transpose_b = true}
// W16-LABEL: func.func @half
// W16-NOT:   transpose_b
// W16-LABEL: func.func @odd
// W16-NOT:   transpose_b
// W16-LABEL: func.func @deep
// W16:       %[[U:.*]] = graph.constant "u.T" : tensor<1024x256xf32>
// W16-NEXT:  %y = graph.matmul %x, %[[U]] {graph.fusion_decision = "transposed: 1 group -> 1, cost 1310.72us -> 671.09us", transpose_b = true}

// RULES-NOT: transpose_b

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
}
