#!/bin/bash
# usage: cap.sh NAME srun OPTS...   |  cap.sh NAME sbatch "SBATCH OPTS" "SRUN OPTS1" "SRUN OPTS2" ...
# writes out/NAME.txt ; run as alice in /tmp/layoutcap
name=$1; kind=$2; shift 2
mkdir -p out
o=out/$name.txt
if [ "$kind" = srun ]; then
  echo "\$ srun $*" > $o
  timeout 60 srun "$@" -l ./show.sh 2>err.$name | sort -n >> $o
  rc=${PIPESTATUS[0]}
  sed 's/^/! /' err.$name >> $o; rm -f err.$name
  echo "exit: $rc" >> $o
else
  sb=$1; shift
  {
    echo '#!/bin/bash'
    echo 'echo "batch: $(./show.sh)"'
    for s in "$@"; do
      echo "echo '\$ srun $s'"
      echo "srun $s -l ./show.sh 2>err.\$SLURM_JOB_ID | sort -n; rc=\${PIPESTATUS[0]}; sed 's/^/! /' err.\$SLURM_JOB_ID; rm -f err.\$SLURM_JOB_ID; echo \"exit: \$rc\""
    done
  } > job.$name.sh
  echo "\$ sbatch $sb" > $o
  timeout 120 sbatch --wait -o job.$name.out $sb job.$name.sh > /dev/null
  cat job.$name.out >> $o; rm -f job.$name.out job.$name.sh
fi
