# Trial summaries as scripts write them: Python's json with NaN, Infinity and -Infinity, garbage, an
# empty file, none at all, no metric, a metric of the wrong type (included by tests/apps/ckpt-flip/CMakeLists.txt).
resil_add_test(NAME ckpt-flip_campaign_summaries
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_campaign_summaries.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 120)
