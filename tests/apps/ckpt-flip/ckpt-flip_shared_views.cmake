# A million views of one torch.save storage (a list of references, memoised nested lists):
# inspect, inject and revert in linear time, inspect's listing of their names bounded.
resil_add_test(NAME ckpt-flip_shared_views
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_shared_views.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 900)
