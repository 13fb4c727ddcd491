# scripts/plot_ec_timeline.py and scripts/report_plots.py on bad input: one line, resil's exit codes,
# no traceback (included by tests/apps/scripts/CMakeLists.txt).
resil_add_test(NAME plot_scripts_hostile LABELS integration TIMEOUT 300
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/plot_scripts_hostile.py ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR})
