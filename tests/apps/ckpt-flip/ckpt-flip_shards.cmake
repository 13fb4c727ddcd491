# Hugging Face sharded checkpoints (an index and its safetensors or torch.save shards, a directory
# with or without an index) as one checkpoint: fault space over every shard, exact flip counts by
# independent readers, per-record shard file, byte-exact revert, replay, diff, scan, a campaign,
# hostile sets refused.
resil_add_test(NAME ckpt-flip_shards
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt-flip_shards.sh $<TARGET_FILE:ckpt-flip>
  LABELS integration TIMEOUT 180)
