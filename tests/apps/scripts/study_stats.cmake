# scripts/study/stats.py (the dp-vs-mp study's statistics) against scipy and exact enumeration.
resil_add_test(NAME study_stats
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/study_stats_test.py
  LABELS unit TIMEOUT 120)
