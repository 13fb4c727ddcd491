# The default inject.role fits the trial (included by tests/apps/ckpt-flip/CMakeLists.txt).
resil_add_test(NAME ckpt-flip_campaign_role_default
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_campaign_role_default.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 120)
