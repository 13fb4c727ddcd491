# ckpt-train resume's options for the dp-vs-mp study (--loss-every, --shuffle-seed, --replica-from,
# --replica-divergence) on real 2-rank dp runs under mpiexec, and a campaign keeping them in its records.
if(TARGET ckpt-train AND TARGET ckpt-flip)
  resil_add_test(NAME ckpt-train_study_options
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-train_study_options.sh $<TARGET_FILE:ckpt-train> $<TARGET_FILE:ckpt-flip>
    LABELS integration mpi TIMEOUT 300 PROPERTIES PROCESSORS 2)
endif()
