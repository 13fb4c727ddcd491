# Parallel trials (--jobs N) and resident trial workers ("mode": "worker", ckpt-train serve): the
# records are the serial command-mode run's, trial by trial; kill -9 with jobs > 1 resumes; a worker
# that dies is restarted and the trial retried, then recorded as crash; config/option errors.
if(TARGET ckpt-train)
  resil_add_test(NAME ckpt-flip_campaign_jobs
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_campaign_jobs.sh $<TARGET_FILE:ckpt-flip> $<TARGET_FILE:ckpt-train>
    LABELS integration TIMEOUT 600)
endif()
