# Real deaths (kill -9, --kill R@S[:node]) of ec-train ranks under mpiexec, survived by
# relaunching through scripts/hpc/ec-train-run.sh; each run ends with the failure-free state_hash
# and parity equal to a fresh encode (included by tests/apps/ec-train/CMakeLists.txt).
if(TARGET ec-train AND RESIL_HAVE_MPI)
  foreach(c external-1 external-2 external-3 external-node-4 external-node-5 two-node-m2 second-during-rebuild
            over-m-exit8 over-m-fallback ckpt-kill stale-segment ckpt-in-write ec-in-write rebuild-external-1
            rebuild-external-2 before-first-commit phases-root-replaced stale-data stale-steps cleanup-running foreign-segment report-paths
            commit-modes external-instep-6 external-instep-node-7)
    resil_add_test(NAME ec-train_kill_${c} LABELS mpi integration TIMEOUT 120
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ec-train_kill.sh ${c} $<TARGET_FILE:ec-train> ${MPIEXEC_EXECUTABLE}
              ${CMAKE_CURRENT_BINARY_DIR}/ec-train_kill
      # 77: the case could not set up its death (a kill inside the start checkpoint's short write).
      PROPERTIES PROCESSORS 4 SKIP_RETURN_CODE 77)
  endforeach()
endif()
