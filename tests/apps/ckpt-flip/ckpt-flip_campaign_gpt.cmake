# Campaigns on gpt checkpoints classified on test_bpb: eval (command and worker mode), resume, a bf16
# checkpoint by role, a tp manifest with global indices in the records.
if(TARGET ckpt-train AND RESIL_HAVE_MPI)
  resil_add_test(NAME ckpt-flip_campaign_gpt
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_campaign_gpt.sh $<TARGET_FILE:ckpt-flip> $<TARGET_FILE:ckpt-train> ${MPIEXEC_EXECUTABLE}
    LABELS integration mpi TIMEOUT 300 PROPERTIES PROCESSORS 2)
endif()
