# ckpt-flip on valid but hostile HDF5 files built by tests/inject/hostile_files.py: null and
# zero-sized dataspaces, 10^12-element never-written datasets, names that are not UTF-8, fault
# spaces beyond 64 bits, hard links, unsupported types and layouts, virtual datasets and links
# into other files (included by tests/apps/ckpt-flip/CMakeLists.txt).
resil_add_test(NAME ckpt-flip_hostile_datasets
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_hostile_datasets.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 600)
