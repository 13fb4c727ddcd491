# scripts/study_dp_vs_mp.sh (the dp-vs-mp study, docs/guide/campaigns.md) at its smallest sizes: every
# kind of campaign, the report with its Findings, plots and compressed records, and a resumed re-run.
if(TARGET ckpt-train AND TARGET ckpt-flip)
  resil_add_test(NAME study_dp_vs_mp
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/study_dp_vs_mp.sh ${PROJECT_BINARY_DIR}
    LABELS integration TIMEOUT 300)
endif()
