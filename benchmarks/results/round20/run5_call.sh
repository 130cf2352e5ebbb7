#!/usr/bin/env bash
# twentieth round, run 5: bench mlp (graph) with the tokens-first grid and run 3's table, then with the N-first grid and
# the table before run 3 (892c612's kernel host code and kernel, c74933f's table), then tokens-first again; bench mlp at the default M set
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
echo "commit $(cat .scratch/commit.txt)" > $OUT/commit.txt
MS=128,160,192,224,256
K=fused_quant/kernels
mkdir -p /tmp/after && cp $K/gemm_launch.py $K/triton/small_m_gemm.py $K/small_m_gemm_configs.json /tmp/after/
timeout 70 python3 -m fused_quant bench mlp --quick --m $MS --out /tmp/a1 > $OUT/ab_after1.txt 2>&1; echo "after1 rc $?" >> $OUT/rcs.txt
cp .scratch/before/gemm_launch.py $K/; cp .scratch/before/small_m_gemm.py $K/triton/; cp .scratch/before/small_m_gemm_configs.json $K/
timeout 70 python3 -m fused_quant bench mlp --quick --m $MS --out /tmp/b1 > $OUT/ab_before.txt 2>&1; echo "before rc $?" >> $OUT/rcs.txt
cp /tmp/after/gemm_launch.py $K/; cp /tmp/after/small_m_gemm.py $K/triton/; cp /tmp/after/small_m_gemm_configs.json $K/
timeout 70 python3 -m fused_quant bench mlp --quick --m $MS --out /tmp/a2 > $OUT/ab_after2.txt 2>&1; echo "after2 rc $?" >> $OUT/rcs.txt
timeout 150 python3 -m fused_quant bench mlp --quick --out /tmp/mlp > $OUT/bench_mlp_default.txt 2>&1; echo "bench mlp default rc $?" >> $OUT/rcs.txt
cp /tmp/mlp/mlp.json $OUT/mlp_default.json; cp /tmp/mlp/*.png $OUT/ 2>/dev/null
cat $OUT/rcs.txt; for f in after1 before after2; do echo "== $f"; grep "^mlp M=" $OUT/ab_$f.txt | cut -c1-230; done
grep "^mlp M=" $OUT/bench_mlp_default.txt | sed "s/ bf16 eager.*| graph/ graph/"
