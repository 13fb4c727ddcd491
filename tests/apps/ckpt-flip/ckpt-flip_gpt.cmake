# ckpt-flip on gpt checkpoints: roles (model, master, optimizer) in fp32 and bf16 none/dp/pp/tp
# checkpoints, --role, and tp flips logged with their global elements, checked with h5py.
if(TARGET ckpt-train AND RESIL_HAVE_MPI)
  resil_add_test(NAME ckpt-flip_gpt
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_gpt.sh $<TARGET_FILE:ckpt-flip> $<TARGET_FILE:ckpt-train> ${MPIEXEC_EXECUTABLE}
    LABELS integration mpi TIMEOUT 300 PROPERTIES PROCESSORS 2)
endif()
