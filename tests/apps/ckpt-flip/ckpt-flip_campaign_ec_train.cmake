# Campaigns of kind ec-train: in-memory flips in a real 4-rank ec-train job per trial (included by
# tests/apps/ckpt-flip/CMakeLists.txt; ckpt-flip_campaign_ec_train.sh says what each part checks).
if(TARGET ec-train AND RESIL_HAVE_MPI)
  resil_add_test(NAME ckpt-flip_campaign_ec_train
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_campaign_ec_train.sh $<TARGET_FILE:ckpt-flip> $<TARGET_FILE:ec-train> ${MPIEXEC_EXECUTABLE}
    LABELS mpi integration TIMEOUT 300
    PROPERTIES PROCESSORS 4)
endif()
