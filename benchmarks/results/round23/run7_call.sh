# twenty-third round, run 7: one command line, as it ran
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1; timeout 150 python3 benchmarks/profile_host.py --top 14 --calls 300 > $OUT/run7_profile_host.txt 2>&1; echo "rc $?" > $OUT/run7_rcs.txt; cat $OUT/run7_rcs.txt; grep -E "^primitive|^===" $OUT/run7_profile_host.txt | head -40
