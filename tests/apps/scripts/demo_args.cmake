# scripts/demo.sh's argument and OUT checks (nothing is built or run; included by tests/apps/scripts/CMakeLists.txt).
resil_add_test(NAME demo_args LABELS integration TIMEOUT 60
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/demo_args.sh)
