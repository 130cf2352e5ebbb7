#!/usr/bin/env bash
# twenty-fourth round, run 2: Nsight Compute on the small-M GEMMs and same-bytes copies; the driver launch's
# A/B in one process (round 23's run 2 again); profile_host.py (not run since its nine-pointer fix)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
git log -1 --format=%H > $OUT/run2_commit.txt 2>/dev/null
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); echo "ncu: $NCU" > $OUT/run2_ncu_log.txt
timeout 240 $NCU --clock-control none --profile-from-start off --target-processes all \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
  --section WarpStateStats --section SchedulerStats -f -o /tmp/gemms \
  python3 benchmarks/results/round24/ncu_gemms.py $OUT/run2_ncu_order.json >> $OUT/run2_ncu_log.txt 2>&1
echo "ncu rc $?" >> $OUT/run2_rcs.txt
$NCU -i /tmp/gemms.ncu-rep --csv --page raw > $OUT/run2_ncu_raw.csv 2>> $OUT/run2_ncu_log.txt
$NCU -i /tmp/gemms.ncu-rep --csv --page details > $OUT/run2_ncu_details.csv 2>> $OUT/run2_ncu_log.txt
timeout 200 python3 benchmarks/results/round24/driver_interleaved.py $OUT/run2_driver_interleaved.json > $OUT/run2_driver_interleaved.txt 2>&1; echo "interleaved rc $?" >> $OUT/run2_rcs.txt
timeout 120 python3 benchmarks/profile_host.py --top 14 --calls 300 > $OUT/run2_profile_host.txt 2>&1; echo "profile_host rc $?" >> $OUT/run2_rcs.txt
cat $OUT/run2_rcs.txt; tail -n 5 $OUT/run2_ncu_log.txt; wc -l $OUT/run2_ncu_raw.csv
tail -n 26 $OUT/run2_driver_interleaved.txt; grep -E "^primitive|^===" $OUT/run2_profile_host.txt | head -30
