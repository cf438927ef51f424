#!/bin/bash
W=/tmp/g10work; end=$((SECONDS + $1))
while [ $SECONDS -lt $end ]; do
  n=$(ls $W/*.rc 2>/dev/null | wc -l); [ "$n" = 3 ] && break
  sleep 10
done
free -g | sed -n 2p; uptime
for p in prefetch_lru lru deepUM; do
  echo "== $p $(cat $W/$p.rc 2>/dev/null) log $(stat -c %s $W/$p.log 2>/dev/null)"
  grep -a "Simulation \[ITER" $W/$p.log | tail -2
  grep -a "Executing Bactcher Event" $W/$p.log | tail -1 | cut -c1-80
  if [ -f $W/$p.rc ]; then
    mkdir -p $OUT/$p; cp $W/results/ResNet152/1280-$p/sim_result.final $OUT/$p/ 2>/dev/null
    grep -E "Elapsed|Maximum resident" $W/$p.time; tail -c 2000 $W/$p.log > $OUT/$p/log_tail.txt
  fi
done
