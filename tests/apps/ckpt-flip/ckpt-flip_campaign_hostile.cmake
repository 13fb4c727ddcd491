# ckpt-flip campaign/report/fit against hostile configurations, records, paths and trial commands
# (kill -9 of the campaign, {ckpt} deleted by the command, two processes on one shard).
resil_add_test(NAME ckpt-flip_campaign_hostile
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_campaign_hostile.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 300)
