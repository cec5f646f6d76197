#!/bin/bash
# $1 = core, $2 = arm (shipped|timeonly)
cd /tmp/s43/pairs
for ds in mnist-pairs cifar10-noisy fashion-mnist-tops; do
  f=$(ls $ds.$2.*.json); m=$(echo $f | cut -d. -f3)
  for s in 0 1 2; do
    HOME=/tmp/s43/hp$1 taskset -c $1 advisor measure --config $f --dataset /tmp/s43/rv/$ds.npz --model $m --seed $s --json --no-record > out.$ds.$2.$s.json 2> err.$ds.$2.$s.log
    python -c "import json;r=json.load(open('out.$ds.$2.$s.json'));print('$ds $2 $s', r.get('status'), r.get('test_accuracy'), r.get('train_time_s'), len(r.get('epochs') or []), r.get('contended'))"
  done
done
