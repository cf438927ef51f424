#!/bin/bash
# Session 11: how much the driver's eviction cost varies between processes.
export LD_LIBRARY_PATH=$PWD/.device/lib
for i in 3 4 5 6 7; do
  timeout 100 .device/umlab_cuda_calibrate > $OUT/calibration$i.json 2> $OUT/calibration$i.err
  python3 -c "import json;d=json.load(open('$OUT/calibration$i.json'));p=d['policy_calls'];print($i, d['evicting_paging']['us_per_block'], p['prefetch_evicting_us_per_call'], p['populate_evicting_us_per_call'], p['prefetch_evicting_written_us_per_call'], p['prefetch_evicting_read_us_per_call'], p['prefetch_evicting_isolated_us_per_call'], d['prefetch'][1]['h2d_us_per_call'], d['prefetch'][1]['d2h_us_per_call'])"
done
free -g | head -2
