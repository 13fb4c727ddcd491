# scripts/slurm/*.sbatch and scripts/pbs/train.pbs run by hand (no scheduler; included by tests/apps/scripts/CMakeLists.txt).
resil_add_test(NAME hpc_scripts_outside LABELS integration TIMEOUT 60
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/hpc_scripts_outside.sh)
