# ckpt-flip campaign/plan/report/fit black-box tests with a real ckpt-train (tests/apps/ckpt-flip/CMakeLists.txt includes this).
if(TARGET ckpt-train)
  resil_add_test(NAME ckpt-flip_campaign_cli
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_campaign.sh $<TARGET_FILE:ckpt-flip> $<TARGET_FILE:ckpt-train>
    LABELS integration TIMEOUT 400)
endif()
# ckpt-flip fit with the shipped field-data fault models on small real campaigns (Monte Carlo vs
# conservative bounds, determinism per seed, SEC-DED arithmetic, usage errors).
if(TARGET ckpt-train)
  resil_add_test(NAME ckpt-flip_fit_cli
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_fit.sh $<TARGET_FILE:ckpt-flip> $<TARGET_FILE:ckpt-train>
    LABELS integration TIMEOUT 300)
endif()
