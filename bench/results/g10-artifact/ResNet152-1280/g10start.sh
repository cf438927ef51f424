#!/bin/bash
# Session 11: G10's own simulator on ResNet152 at 1280 (needs ~28 GB each),
# lru, prefetch_lru and deepUM side by side, in the background; then watch.
G=$PWD/.device/g10; W=/tmp/g10work
if [ ! -d $W ]; then
  cp -r $G $W
  cd $W/src
  for p in prefetch_lru lru deepUM; do
    (setsid nohup bash -c "/usr/bin/time -v -o $W/$p.time ./gpg ../configs/1280-$p.config < ../frontend/Nets/ResNet152.txt > $W/$p.log 2>&1; echo rc=\$? > $W/$p.rc" > /dev/null 2>&1 &)
  done
fi
bash $G/../g10watch.sh ${1:-560}
