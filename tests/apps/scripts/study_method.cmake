# scripts/study/dp_vs_mp.py (the dp-vs-mp study, docs/design/study-method.md) at its smallest: golden
# runs, a noise arm of each kind, a primary, a one-replica and a bit-30 campaign, the published records,
# the report, and a resumed re-run that runs nothing again; damaged or foreign records, concurrent and
# killed runs, failed resumes, a full filesystem and --commit misuse each end in one error line.
if(TARGET ckpt-train AND TARGET ckpt-flip)
  resil_add_test(NAME study_method
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/study_method.sh ${PROJECT_BINARY_DIR}
    LABELS integration mpi TIMEOUT 300)
endif()
