# scripts/study/transformer.py (the transformer study, docs/design/study-method.md) on a tiny gpt: the arm
# listing and the budget's arithmetic, the v shrink/grow split and the exponent-MSB exclusion on real
# records, the per-tensor PVF table from real trial records against an independent count, the report.
if(TARGET ckpt-train AND TARGET ckpt-flip AND RESIL_HAVE_MPI)
  resil_add_test(NAME study_transformer
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/study_transformer.sh ${PROJECT_BINARY_DIR}
    LABELS integration mpi TIMEOUT 300 PROPERTIES PROCESSORS 2)
endif()
