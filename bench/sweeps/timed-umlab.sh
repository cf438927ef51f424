#!/bin/sh
# umlab under /usr/bin/time, for measuring a sweep's per-case cost: give it
# to `umlab sweep --umlab=bench/sweeps/timed-umlab.sh`. Each case appends a
# line to $UMLAB_TIME_LOG (default /tmp/umlab-times.log): user and system CPU
# seconds, wall seconds, peak resident KiB, then the arguments. Runs
# $UMLAB_BINARY (default: build/cli/umlab beside this script's repository).
# The case names do not depend on the binary, so a timed sweep resumes an
# untimed one and the other way round.
here=$(cd "$(dirname "$0")/../.." && pwd)
exec /usr/bin/time -a -o "${UMLAB_TIME_LOG:-/tmp/umlab-times.log}" -f "%U %S %e %M $*" \
  "${UMLAB_BINARY:-$here/build/cli/umlab}" "$@"
