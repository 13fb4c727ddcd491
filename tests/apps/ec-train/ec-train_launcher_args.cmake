# scripts/hpc/ec-train-run.sh's argument handling, with stand-ins for mpiexec and ec-train (no MPI;
# included by tests/apps/ec-train/CMakeLists.txt).
resil_add_test(NAME ec-train_launcher_args LABELS integration TIMEOUT 60
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ec-train_launcher_args.sh)
