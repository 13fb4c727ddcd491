# How a flip log identifies its file: logged sample-sha256 hashes against an independent Python
# implementation (raw files of every size class, a sparse 1 TiB one), revert/replay refusing a
# changed file (exit 7) and --force, the sample's limit against --hash sha256, logs without a
# footer, and logs written before "hash" existed (sha256 or empty) still reverting.
resil_add_test(NAME ckpt-flip_identity
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_identity.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 180)
